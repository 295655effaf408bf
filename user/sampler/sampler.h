/* SPDX-License-Identifier: MIT */
/*
 * sampler.h - the sampling channel: load and attach sampler.bpf.c, hand it
 * the targets' layouts, and turn its counts into a profile.
 *
 *	s = sampler__open(&opts, err, sizeof(err));
 *	sampler__add_target(s, &target, zones, err, sizeof(err));	// and _remove_target
 *	while (running) poll(sampler__fd(s)), sampler__drain(s);	// name new stacks
 *	... and every few ticks sampler__poll(s);	// age the caches too
 *	sampler__collect(s, &profile);			// counts so far
 *	sampler__take(s, &profile);			// final counts, before the close
 */
#ifndef NUPP_SAMPLER_API_H
#define NUPP_SAMPLER_API_H

#include <stdbool.h>
#include "luajit/lj_target.h"
#include "profile/profile.h"

enum sampler_clock {
	SAMPLER_CLOCK_AUTO,	/* the tick when it can give the rate asked, else
				 * the cpu clock (sampler__clock_for) */
	SAMPLER_CLOCK_CPU,	/* a cpu-clock perf_event per CPU at the asked rate */
	SAMPLER_CLOCK_THREAD,	/* the same on each thread of each target, inherited
				 * by what it starts: no other task interrupted, each
				 * switch of a target's thread re-arms its timer */
	SAMPLER_CLOCK_TICK,	/* the scheduler tick (CONFIG_HZ), no extra interrupt;
				 * below CONFIG_HZ, the targets' ticks thinned to the rate */
	SAMPLER_CLOCK_OFF_CPU,	/* the scheduler's switches: the time a thread spends
				 * switched out, charged to its Lua stack then
				 * (bpf/offcpu.h); counts are microseconds */
	SAMPLER_CLOCK_ALLOC,	/* the VM's allocator: bytes allocated, sampled by
				 * bytes (bpf/alloc.h); counts are bytes */
};

struct sampler_opts {
	enum sampler_clock clock;
	unsigned freq_hz;	/* samples per second, or 0 to use period_us */
	unsigned period_us;	/* microseconds between samples */
	unsigned depth;		/* frames per stack, 1..NUPP_MAX_DEPTH */
	unsigned max_stacks;	/* distinct stacks the kernel map holds */
	bool lines;		/* each Lua frame carries its current line */
	bool dumpstack_names;	/* C functions by address, as dumpstack names them */
	bool no_walk_caches;	/* no GC probe, no walk caches: a run of a few ms,
				 * whose end must not wait ~0.1 s for the probe's removal */
	unsigned min_block_us;	/* off the CPU: shorter waits are not counted */
	bool include_preempted;	/* off the CPU: count preemptions as waits too */
	bool coroutine_waits;	/* off the CPU: a coroutine's wait from its yield
				 * from C to its resume counts too (--waits) */
	__u64 alloc_mean;	/* allocations: bytes between two samples, on average */
};

/* A sampler's options unless asked otherwise, for every way in: the CLI's
 * (main.c) and the Lua API's (lua_module.c, which takes its interval and
 * depth from the script, as the API's contract says). */
#define SAMPLER_OPTS_DEFAULT {			\
	.clock = SAMPLER_CLOCK_AUTO,		\
	.freq_hz = 99,				\
	.depth = 16,				\
	.max_stacks = 65536,			\
	.alloc_mean = 512 * 1024,		\
}

/* Userspace reasons a sample did not make it into the profile. */
struct sampler_stats {
	__u64 samples;			/* timer hits in target processes */
	__u64 paused;			/* of which while paused */
	__u64 unresolved[NUPP_ERR_MAX];	/* by enum nupp_err, counted in the kernel;
					 * NUPP_ERR_NO_VM less before_vm */
	__u64 before_vm;		/* samples taken before their process had a VM */
	__u64 thread_no_vm;		/* samples that found no VM on a thread of a process
					 * whose VM was known: threads that run no Lua
					 * (a host's own); NUPP_ERR_NO_VM less these too */
	__u64 unsymbolized;		/* samples whose target memory was gone */
	__u64 unreadable;		/* samples kept with [unknown] frames */
	__u64 truncated;		/* samples whose stack was cut at the depth */
	__u64 trace_compiled;		/* compiled samples counted in a stack, but
					 * those in the VM leaving their trace */
	__u64 trace_mapped;		/* of which mapped through their trace */
	__u64 trace_unmapped;		/* compiled samples with a position that did not
					 * map (in code the trace called, trace gone) */
	__u64 trace_gone;		/* of trace_compiled, in a trace gone before they
					 * were symbolized (TRACEMAP_GONE) */
	__u64 trace_in_vm;		/* compiled samples in the interpreter's code,
					 * leaving their trace (TRACEMAP_IN_VM) */
	unsigned weight;		/* what a sample counts for at the end: 1, or
					 * more once --max-cpu lowered the rate */
	__u64 waits;			/* off the CPU: waits counted in rows (the
					 * counts above are then nanoseconds) */
	__u64 co_waits, co_ns;		/* --waits: those of them that are coroutines',
					 * and their time: overlapping their threads' */
	unsigned switch_every;		/* off the CPU: 1, or one switch in this many
					 * was walked at some time, counting for as many */
	__u64 alloc_live;		/* allocations: sampled blocks still in use */
	__u64 alloc_untracked;		/* sampled blocks whose frees could not be
					 * followed (the kernel's table was full) */
};

struct sampler;
struct zones;

struct sampler *sampler__open(const struct sampler_opts *o, char *err, size_t errsz);
/* The clock o->clock names, SAMPLER_CLOCK_AUTO made what it stands for: the
 * tick when it can give the rate (at most CONFIG_HZ, the tick handler known,
 * no nohz_full CPU), which adds no interrupt; else the cpu clock. */
enum sampler_clock sampler__clock_for(const struct sampler_opts *o);

/* The sampler as one channel of a session (channel/channel.h); NULL for NULL. */
struct channel *sampler__channel(struct sampler *s);
void sampler__close(struct sampler *s);

/* Open the uprobes sampler__add_target will attach for t, before the
 * sampler is open: registering one takes the kernel ~20 ms, which then
 * overlaps the sampler's load. */
void sampler__open_probes_early(const struct sampler_opts *o, const struct lj_target *t);

/* Close the early probes no target took (its attach failed, or the sampler
 * never loaded): an open one keeps its breakpoint in the target. Called by
 * the thread that opened them. */
void sampler__close_early_probes(void);

/* What the BPF sampler is told of t's process (struct nupp_proc): its
 * layout, where it reads the VM's fields, its interpreter and the files'
 * code near it, its only VM, the call-site kind of each opcode (sym, a
 * symbolizer of t's build). The sampler's own settings (frames, table,
 * slot, zone) are left 0. 0, or -1 with why in err. */
struct symbolizer;
int sampler__describe(const struct lj_target *t, const struct symbolizer *sym,
		      struct nupp_proc *proc, char *err, size_t errsz);

/* Start sampling the process of t (t must outlive the sampler), with the
 * zones of its zone module when z has found them already (else NULL, or
 * sampler__set_zones later). */
int sampler__add_target(struct sampler *s, const struct lj_target *t, struct zones *z,
			char *err, size_t errsz);

/* t's VMs were rescanned (lj_target__scan_vms): a process with exactly one
 * VM lets samples taken in C code, where r14 may not hold DISPATCH, fall back
 * to it. 0 or -errno. */
int sampler__refresh_target(struct sampler *s, const struct lj_target *t);

/* t's process exited: its slot stops matching, so that a process that gets
 * the pid next is not sampled as it; what was counted stays. */
void sampler__remove_target(struct sampler *s, const struct lj_target *t);

/* Did the process of pid execute another program since it was added? The
 * kernel stopped sampling it then (on_exec in bpf/sampler.bpf.c). When it
 * did, the stacks it left are taken in first, and the target is removed as
 * by sampler__remove_target: the pid can be added again for the new program. */
bool sampler__target_execed(struct sampler *s, pid_t pid);


/* Once the target's zone module is found (user/zones/zones.h), samples carry the
 * zone path open in it; z stays the caller's. 0 or -errno. */
int sampler__set_zones(struct sampler *s, const struct lj_target *t, struct zones *z);

/* Read again which files' code lies near the target's interpreter: the
 * libraries a program maps after the attach (a launched one's C library),
 * whose code is no trace's (nupp_proc.code). */
void sampler__refresh_code(struct sampler *s, const struct lj_target *t);

/* Suspend or resume recording; the timer keeps firing. */
void sampler__pause(struct sampler *s, bool paused);

/* Stop sampling for good: the timers and the exec program are detached
 * (the GC probes stay until sampler__close). */
void sampler__stop(struct sampler *s);

/* Symbolize the stacks seen since the last poll, while their memory exists. */
int sampler__poll(struct sampler *s);

/* Symbolize the stacks new since the last call alone: a name is read while
 * its code, and its process, still exist. How many there were, or -errno. */
int sampler__drain(struct sampler *s);

/* A descriptor that polls readable when a new stack comes (the kernel wakes
 * the ring when it had been read empty): wait on it, then sampler__drain. */
int sampler__fd(const struct sampler *s);

/* Distinct stacks seen so far (kernel side) and their total samples. */
void sampler__progress(struct sampler *s, __u64 *samples, __u64 *stacks);

/* Poll once more and add every stack with its final counts to p. */
int sampler__collect(struct sampler *s, struct profile *p, struct sampler_stats *st);

/* sampler__collect for the last time: the sampler's rows are moved into p
 * (empty), not copied (a large program has thousands), and the sampler
 * keeps none; sampler__close() is all that may follow. */
int sampler__take(struct sampler *s, struct profile *p, struct sampler_stats *st);

/* The same without a copy: the sampler's own rows, their counts brought up
 * to date (a row keeps its index; new ones come last). The caller may
 * change the counts, which the next call sets again; NULL when a poll
 * failed. */
struct profile *sampler__counts(struct sampler *s, struct sampler_stats *st);

/* Halve the sampling rate (--max-cpu): every cpu-clock event's period
 * doubles, and a sample counts for twice as many (the BPF program's
 * weight), so that counts stay samples at the rate asked and the period a
 * profile states stays true. The new weight, or -ENOTSUP on the scheduler
 * tick (its rate is the kernel's) or below 1/SAMPLER_WEIGHT_MAX of the rate
 * asked, or -errno. */
#define SAMPLER_WEIGHT_MAX	64
int sampler__slow_down(struct sampler *s);
/* What a sample counts for now: 1, or what sampler__slow_down made it. */
unsigned sampler__weight(const struct sampler *s);

/* Whether s counts time off the CPU (SAMPLER_CLOCK_OFF_CPU): its rows end
 * in a kernel frame (the system call and wait channel) and count
 * microseconds, its stats nanoseconds. */
bool sampler__off_cpu(const struct sampler *s);

/* Whether s samples allocations (SAMPLER_CLOCK_ALLOC): its rows count
 * bytes, with their objects and what is still in use (profile_row.alloc). */
bool sampler__alloc(const struct sampler *s);

/* The time between two samples of a thread, 0 when unknown (the tick of a
 * kernel whose CONFIG_HZ is not on record); off the CPU, what a count is
 * (a microsecond). */
__u64 sampler__period_ns(const struct sampler *s);

/* How many samples of process pid found no VM so far. Read before a VM
 * scan that then finds none, it counts samples taken before the process had
 * a VM (its VM, once made, is not freed before it exits): report them with
 * sampler__before_vm, as outside Lua, not unresolved. */
__u64 sampler__vmless(struct sampler *s, pid_t pid);
void sampler__before_vm(struct sampler *s, pid_t pid, __u64 vmless);

/* Names of enum nupp_err values, for summaries. */
const char *sampler__err_name(int err);

#endif /* NUPP_SAMPLER_API_H */
