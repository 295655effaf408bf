/* SPDX-License-Identifier: MIT */
/*
 * sampler_int.h - what the sampler's files share: sampler.c (the BPF
 * object, its targets, its counts), stack_rows.c (naming each stack into a
 * row), sampler_probes.c (the uprobes a target gets and the walk caches they
 * drive), waits.c and allocs.c (the off-CPU and allocation clocks). Not for
 * use outside them.
 */
#ifndef NUPP_SAMPLER_INT_H
#define NUPP_SAMPLER_INT_H

#include <linux/types.h>
#include <pthread.h>
#include "base/keymap.h"
#include "base/uprobe.h"
#include "channel/channel.h"
#include "profile/profile.h"
#include "sampler.h"
#include "sampler.skel.h"
#include "sampler_abi.h"

struct target {
	const struct lj_target *t;
	pid_t pid;			/* storage the memory reader points at */
	struct symbolizer *sym;
	struct codemap *code;		/* where its C functions come from */
	struct cfunc_names *cnames;	/* and their names */
	struct tracemap *tm;		/* NULL: its build's traces are not mapped */
	struct zones *zones;		/* the caller's, NULL until set */
	struct nupp_proc proc;		/* as configured in the procs map */
	struct uprobe *gc_probe;	/* retires the walk caches; NULL: no caches */
	struct uprobe *vm_probe;	/* names a new VM to the sampler; NULL: none */
	struct bpf_link *sweep_link;	/* --off-cpu -F: the iterator over its threads */
#define TARGET_WAIT_PROBES 5
	struct uprobe *wait_probes[TARGET_WAIT_PROBES];	/* --waits: lua_yield, lua_resume, */
	int nwait_probes;		/* the VM's coroutine fast functions */
#define TARGET_ALLOCATORS 4
	__u64 alloc_at[TARGET_ALLOCATORS];	/* --alloc: its VMs' allocators, */
	int alloc_fd[TARGET_ALLOCATORS];	/* each one's uprobe session link (-1: none) */
	int nallocs;
	bool alloc_refused;		/* --alloc: its layout has no heap: said so */
	const struct nupp_new_slot *naming;	/* the ring record of the stack being
						 * named: its captured memory first */
	__u64 seen_epoch;		/* the GC epoch the symbolizer's caches hold for */
	double seen_at;			/* when it was read (CLOCK_MONOTONIC, s) */
	double caches_retry_at;		/* caches off for GC cycles too often: when to try again, */
	double caches_backoff;		/* after how long (s), doubled at each failure; 0 never off */
	__u64 before_vm;		/* its samples that found no VM, taken before it had one */
	__u64 vm_known_at;		/* its vmless count + 1 when a scan first found its
					 * VM (or when added with one), 0 before */
	bool gone;			/* the process exited or executed another program:
					 * its pid may be another target's now */
	__u32 slot;			/* in the BPF program's maps */
};

/* A stack as mapped through its trace, with what else makes its row. */
struct mapped_key {
	__u32 pid, tid;
	__u64 g;
	__u32 zone;
	__u16 depth, shown;
	struct nupp_frame frames[];
};

#define SLOT_SEEN	3	/* slot_row of a slot seen: its row (>= -2) + 3 */

struct sampler {
	struct channel channel;		/* first: the session's view of it */
	struct sampler_bpf *skel;
	struct bpf_link **links;
	int *perf_fds;			/* per-CPU cpu-clock events, links[i]'s; else NULL */
	int nlinks;
	bool task_events;		/* events on the targets' threads, not per CPU: cpu-clock
					 * ones, or (off_cpu) context-switch ones */
	struct evented {		/* the processes whose threads have them */
		pid_t pid;
		unsigned long long start;	/* procmem__stat's: exec keeps it */
		__u32 tag;		/* nupp_proc.events_tag */
		struct bpf_link **links;	/* one per thread, each owning its event */
		int nlinks, cap;
	} *evented;
	int nevented, evented_cap;
	bool tick;			/* on the scheduler tick (--clock tick) */
	unsigned weight;		/* what a sample counts for (sampler__slow_down) */
	struct bpf_link *exec_link;	/* on_exec */
	size_t frames_size;		/* of a stacks map value: --depth + 1 frames */
	struct nupp_frame *frames;	/* a buffer of that size */
	struct sym_frame *info;		/* what each of them is, outermost first */
	__u64 period_ns;		/* between two samples of a thread, 0 unknown */
	struct nupp_frame *mapped;	/* the same with the frames inlined into a trace */
	int max_shown;			/* --depth */
	bool lines;			/* frames carry their current line */
	bool dumpstack_names;		/* C functions by address (@0x…) */
	bool no_walk_caches;		/* sampler_opts.no_walk_caches */
	struct target **targets;	/* by slot, as in the BPF program (each stays put:
					 * symbolizers read its pid) */
	int ntargets, cap;
	struct nupp_stack_slot *table;	/* the counts table, mapped read-only */
	size_t table_len, table_bytes;	/* slots, bytes mapped */
	struct nupp_proc *procs;	/* the procs map, mapped: live slots' fields */
	struct ring_buffer *new_slots;	/* slots claimed since the last poll, with
					 * their stacks' frames (struct nupp_new_slot) */
	long *slot_row;			/* by slot: 0 not seen, else SLOT_SEEN + its row in
					 * rows (-2: unsymbolized); zero pages until used */
	__u32 *known;			/* slots seen, in the order they were */
	size_t nknown;
	struct keymap seen;		/* kernel key -> KEY_VALUE(row, enum tracemap_result);
					 * row -2: unsymbolized */
	__u8 *slot_map;			/* by slot: enum tracemap_result of its key */
	struct keymap rendered;		/* a mapped stack's frames (struct mapped_key) -> its
					 * row: the keys of one trace's instructions that
					 * map alike render alike */
	struct mapped_key *mkey;	/* a buffer for one */
	struct profile rows;		/* rows with counts still 0 until collect */
	__u64 unsymbolized_keys;
	/* Off the CPU (waits.c): */
	bool off_cpu;
	bool coroutine_waits;		/* --waits: yield-to-resume probes on each target */
	struct ksyms *ksyms;		/* names the wait channels */
	struct keymap wait_rows;	/* struct wait_row_key -> its row in rows */
	__u64 *row_ns;			/* by row and state: nanoseconds waited */
	size_t row_ns_cap;		/* rows it has room for */
	unsigned switch_every;		/* one switch out in this many is walked (0: 1) */
	unsigned switch_every_max;	/* the largest so far */
	__u64 switches_seen;		/* target switches out walked, at switches_at */
	double switches_at;		/* when (CLOCK_MONOTONIC, s); 0 never */
	/* --off-cpu -F: the machine's threads swept at the rate, not each
	 * switch seen (bpf/offcpu.h, sweep_off_cpu). */
	bool sweep;
	__u64 sweep_period_ns;		/* the mean time between two sweeps */
	pthread_mutex_t sweep_lock;	/* sweep_links, between the sweeper and the session */
	struct bpf_link **sweep_links;	/* the iterators a sweep reads: one per live target */
	size_t nsweep_links, sweep_links_cap;
	pthread_t sweeper;		/* the thread that sweeps */
	bool sweeping;			/* it runs */
	int sweep_stop;			/* asks it to end (atomic) */
	struct nupp_sweep_seen *gone;	/* entries of threads gone while waiting */
	size_t ngone, gone_cap;
	double pruned_at;		/* when sweep_seen was last pruned */
	bool taking;			/* sampler__take's read, the last */
	/* Allocations (allocs.c): */
	bool alloc;
	int session_type;		/* BPF_TRACE_UPROBE_SESSION in this kernel */
	__u64 *alloc_objects;		/* the alloc_objects map, mapped: by slot */
};

/* Set one field of a listed target's entry, in place: rewriting the entry
 * would also set back its GC epoch, which the kernel bumps meanwhile
 * (the caches would take entries of freed code for valid again). */
#define SET_LIVE(s, tg, field, v) do {						\
	(tg)->proc.field = (v);							\
	__atomic_store_n(&(s)->procs[(tg)->slot].field, (tg)->proc.field,	\
			 __ATOMIC_RELEASE);					\
} while (0)

/* sampler_probes.c; hidden: the Lua module's library is loaded into hosts
 * whose own symbols could take these names. */
#define SAMPLER_INTERNAL __attribute__((visibility("hidden")))

/* The live target of pid: one that exited may have left its pid to another. */
static inline struct target *target_of(struct sampler *s, __u32 pid)
{
	for (int i = 0; i < s->ntargets; i++)
		if (s->targets[i]->pid == (pid_t)pid && !s->targets[i]->gone)
			return s->targets[i];
	return NULL;
}

SAMPLER_INTERNAL void enable_walk_caches(struct sampler *s, struct target *tg);
/* The walk caches off: the probe goes (its removal waits for a grace
 * period, here or, aside, on a thread of its own). */
SAMPLER_INTERNAL void disable_walk_caches(struct target *tg, bool aside);
SAMPLER_INTERNAL void watch_new_vm(struct sampler *s, struct target *tg);
/* --waits: probes where coroutines yield and are resumed, through the C
 * API and in the VM; a way the build lacks is said in a note on stderr. */
SAMPLER_INTERNAL void watch_coroutine_waits(struct sampler *s, struct target *tg);
SAMPLER_INTERNAL void forget_freed_code(struct sampler *s, struct target *tg, __u64 epoch);
SAMPLER_INTERNAL __u64 current_epoch(struct sampler *s, struct target *tg);
/* stack_rows.c: slot idx holds a key: give it its row (e: its ring record, or NULL). */
SAMPLER_INTERNAL int see_slot(struct sampler *s, __u32 idx, const struct nupp_new_slot *e);
/* waits.c: the kernel's side of the off-CPU clock, and its rows. */
SAMPLER_INTERNAL int waits__configure(struct sampler *s, const struct sampler_opts *o,
				      char *err, size_t errsz);
/* The rows of the waits so far: a Lua stack's row and a leaf frame of its
 * wait's system call and wait channel, counting microseconds. 0 or -ENOMEM. */
SAMPLER_INTERNAL int waits__rows(struct sampler *s, struct sampler_stats *st);
SAMPLER_INTERNAL void waits__free(struct sampler *s);
/* Start and stop the sweeps of --off-cpu -F (s->sweep): a thread of
 * nupp-bpf reads the sweep iterator about every sweep_period_ns. */
SAMPLER_INTERNAL int waits__start_sweeps(struct sampler *s, char *err, size_t errsz);
SAMPLER_INTERNAL void waits__stop_sweeps(struct sampler *s);
/* A target's threads swept from now on (its own iterator, whose visits
 * are its threads alone), or no more. */
SAMPLER_INTERNAL int waits__sweep_target(struct sampler *s, struct target *tg, char *err,
					 size_t errsz);
SAMPLER_INTERNAL void waits__unsweep_target(struct sampler *s, struct target *tg);
/* allocs.c: the kernel's side of the allocation clock, its probes on the
 * VMs' allocators (each VM found so far; again after a scan), and the rows'
 * objects and bytes in use. */
SAMPLER_INTERNAL int allocs__configure(struct sampler *s, const struct sampler_opts *o,
				       char *err, size_t errsz);
SAMPLER_INTERNAL void allocs__watch(struct sampler *s, struct target *tg);
SAMPLER_INTERNAL void allocs__unwatch(struct target *tg);
SAMPLER_INTERNAL int allocs__rows(struct sampler *s, struct sampler_stats *st);
/* Once a second: the rate target threads switch out at, and from it how
 * many of those switches the kernel walks (switch_every). */
SAMPLER_INTERNAL void waits__poll(struct sampler *s);

#endif /* NUPP_SAMPLER_INT_H */
