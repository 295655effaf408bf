/* SPDX-License-Identifier: MIT */
/*
 * dump_int.h - what a dump found, shared by dump.c (reading it from the
 * process) and dump_print.c (writing it as text or JSON).
 */
#ifndef NUPP_DUMP_INT_H
#define NUPP_DUMP_INT_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include "luajit/lj_target.h"
#include "luajit/symbolize.h"
#include "profile/profile.h"
#include "sampler/tracemap.h"

struct lj_walk_mem;

struct dthread {
	pid_t tid;
	char comm[32];
	char state;		/* /proc/PID/task/TID/stat: R, S, D, T ... */
	bool blocked;		/* in the kernel, its registers known: not running */
	long nr;		/* its system call, -1 none (stopped outside one) */
	__u64 sp, pc;		/* user stack pointer and pc at the kernel entry */
	__u64 stack_lo, stack_hi;	/* the mapping holding sp */
	char wchan[64];		/* where in the kernel it waits */
	int vm;			/* its VM's index, -1 none known */
};

struct dframe {
	char *name;		/* as collapsed stacks name it, without the line */
	char *file;		/* Lua: its chunk; else "" */
	enum profile_frame_kind kind;
	__u32 line;		/* Lua: the line being run, 0 unknown */
	__u32 start_line;	/* Lua: where the function starts */
};

enum stack_from { FROM_NONE, FROM_MEMORY, FROM_SAMPLE };

struct dvm {
	__u64 g, L;		/* its global_State, its running lua_State (cur_L) */
	__s32 vmstate;		/* g->vmstate as read */
	__u64 base, stack, maxstack, cframe, jit_base;
	int thread;		/* index in dump.threads, -1 unknown */
	const char *thread_how;	/* how the thread was told: "stack", "sample" */
	enum stack_from from;
	__u32 state;		/* enum nupp_state of the stack shown */
	__u64 samples, of;	/* sampled: the stack's samples, of all the VM's */
	struct dframe frames[NUPP_MAX_DEPTH];	/* innermost first */
	int nframes;
	bool truncated;		/* more frames below the last one */
	char note[192];		/* what is not known, and why */
};

struct dump {
	pid_t pid;
	struct lj_target t;
	struct dthread *threads;
	int nthreads;
	struct dvm vms[LJ_TARGET_MAX_VMS];
	int nvms;
	struct symbolizer *sym;
	struct tracemap *tm;
	struct lj_walk_mem *walk;
	unsigned window_ms;	/* how long running VMs were sampled, 0 not */
	char sample_why[160];	/* why they could not be, "" when they were */
	double t0;
};

/* d as text (what a person reads) or JSON, on out. */
void dump__print_text(const struct dump *d, FILE *out);
void dump__print_json(const struct dump *d, FILE *out);

#endif /* NUPP_DUMP_INT_H */
