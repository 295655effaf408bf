/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * offcpu.h - the sampler's off-CPU clock: the time a target thread spends
 * switched out, charged to its Lua stack. Included by sampler.bpf.c, whose
 * targets, walk and counts table it shares; a sampler opened with this
 * clock loads these programs instead of its timers.
 *
 * One program where a target thread switches out (on_switch_out, on the
 * thread's context-switch event): a thread that blocks (or, with
 * --include-preempted, is preempted) has its Lua stack walked there, while
 * its memory is the current one, and counted in a slot for nothing yet; at
 * its next switch out (or its exit), the time it spent switched out, if at
 * least min_block_ns, is counted in that slot and by system call and wait
 * channel in `waits`. (A probe where the thread comes back,
 * finish_task_switch, would walk only the waits kept, but this kernel has
 * no kprobes and refuses fentry there: kernel-notes/offcpu.md.)
 */
#ifndef NUPP_OFFCPU_H
#define NUPP_OFFCPU_H

const volatile __u64 min_block_ns;	/* --min-block */
const volatile __u32 include_preempted;	/* --include-preempted */
const volatile __u64 sched_text_lo, sched_text_hi;	/* the scheduler's code
							 * (__sched_text_start..end) */
/* One switch out in this many is walked and noted, its wait counting for as
 * many: set by userspace when target threads switch so often that a walk
 * of each would cost them too much (waits__poll); 1: every one. */
volatile __u32 switch_every = 1;

/* Switches out of target threads walked (per CPU, index 0): userspace
 * reads their rate, times switch_every, to set switch_every. Counted where
 * a walk is, not on every switch: a map lookup less there. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} walked SEC(".maps");

/* A target thread's entry, in the task itself (task-local storage): a
 * pointer away, where a hash lookup by thread costs more than the rest of
 * the program's fast path. Userspace reads it too, for a wait under way. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct nupp_off_since);
} off_since SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct nupp_wait_key);
	__type(value, struct nupp_wait);
} waits SEC(".maps");

/* Per-CPU scratch: the kernel stack searched for the wait channel, and the
 * entry of the thread switched out. */
struct switch_scratch {
	__u64 ip[NUPP_KSTACK];
	struct nupp_off_since since;
	__u64 owner;		/* the walk using it (sweep_walk) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct switch_scratch);
} switch_scratch SEC(".maps");

/* The wait channel of the task switching out (the current one): the first
 * return address on its kernel stack past the scheduler's code, as the
 * kernel's get_wchan() finds it (the stack is unwound from the registers
 * the context-switch event took in the scheduler); 0 unknown. */
static __always_inline __u64 wait_channel(void *ctx, struct switch_scratch *ss)
{
	long got = bpf_get_stack(ctx, ss->ip, sizeof(ss->ip), 0);
	bool in_sched = false;

	for (__u32 i = 0; i < NUPP_KSTACK; i++) {
		__u64 ip = ss->ip[i];
		bool sched = ip >= sched_text_lo && ip < sched_text_hi;

		if ((long)(i * 8) >= got)
			break;
		if (in_sched && !sched)
			return ip;
		in_sched |= sched;
	}
	return 0;
}

/* The same of a task switched out (a sweep): the kernel unwinds its saved
 * stack from where it left the scheduler, so the first return address not
 * in the scheduler's code. */
static __always_inline __u64 task_wait_channel(struct task_struct *task, struct switch_scratch *ss)
{
	long got = bpf_get_task_stack(task, ss->ip, sizeof(ss->ip), 0);

	for (__u32 i = 0; i < NUPP_KSTACK; i++) {
		__u64 ip = ss->ip[i];

		if ((long)(i * 8) >= got)
			break;
		if (ip < sched_text_lo || ip >= sched_text_hi)
			return ip;
	}
	return 0;
}

/* Whether task, switched out, is blocked: taken off its run queue, or left
 * on it with its dequeue delayed (se.sched_delayed, Linux 6.12+); else it
 * was preempted. Its __state is no guide: a thread preempted
 * (cond_resched()) after it set a sleeping state and before it slept, as
 * wait4 reaping a child does, keeps that state though it stays runnable. */
static __always_inline bool task_blocked(struct task_struct *task)
{
	return !task->on_rq || (bpf_core_field_exists(task->se.sched_delayed) &&
				BPF_CORE_READ(task, se.sched_delayed));
}

/* Charge a wait of ns to what the thread's entry names: its stack's slot
 * (by state), and its kernel side in waits. */
static __always_inline void charge(struct task_struct *task, const struct nupp_wait_key *wk,
				   __u64 ns, __u64 weight)
{
	__u32 k = wk->slot;
	struct nupp_stack_slot *slot = bpf_map_lookup_elem(&counts, &k);
	struct nupp_wait one, *have;
	struct nupp_proc *p;

	ns *= weight;
	one = (struct nupp_wait){ ns, weight };
	if (k == NUPP_WAIT_UNCOUNTED) {	/* in the counter the walk's failure went to */
		count_n(wk->state, ns);
		/* and, found no VM, by process as sample() counts it: userspace
		 * tells a thread in no VM from one whose VM it had not found. */
		if (wk->state == NUPP_CNT_ERR + NUPP_ERR_NO_VM && (p = proc_of(view_tgid(task))))
			__sync_fetch_and_add(&p->vmless, ns);
		return;
	}
	if (slot && wk->state < NUPP_ST_MAX)
		__sync_fetch_and_add(&slot->state[wk->state & 7], ns);
	have = bpf_map_lookup_elem(&waits, wk);
	if (!have && !bpf_map_update_elem(&waits, wk, &one, BPF_NOEXIST))
		return;
	if (!have && !(have = bpf_map_lookup_elem(&waits, wk)))
		return;
	__sync_fetch_and_add(&have->ns, ns);
	__sync_fetch_and_add(&have->n, weight);
}

/* A wait begun at ts, from the stack sample() just walked (its slot; or,
 * when the walk failed, the failure, counted as unresolved at its end),
 * noted in ss->since for the caller to keep. */
static __always_inline void note_wait(struct switch_scratch *ss, const struct sampler_scratch *sc,
				      __u64 ts, __s32 syscall, __u64 wchan, __u8 preempted,
				      __u32 weight)
{
	ss->since.ts = ts;
	ss->since.wait.slot = sc->missed ? NUPP_WAIT_UNCOUNTED : sc->slot;
	ss->since.wait.state = sc->missed ? sc->missed - 1 : sc->state;
	ss->since.wait.syscall = syscall;
	ss->since.wait.preempted = preempted;
	ss->since.wait.wchan = wchan;
	ss->since.weight = weight;
}

/* The wait a thread's entry notes, ended when the thread came back: charged
 * the time from its switch out to its switch in. The program runs only
 * where threads switch out, so the switch in is found afterwards: the time
 * since the wait began less what the thread has run since
 * (se.sum_exec_runtime: brought up to date at a switch out, and by each
 * scheduler tick). The scheduler's own stamp of the switch in
 * (sched_info.last_arrival) is in its run queue's clock, which this kernel
 * does not let a program read (no address for the per-CPU runqueues). */
static __always_inline void end_wait(struct task_struct *task, struct nupp_off_since *since,
				     __u64 now, __u64 ran)
{
	__u64 off = now - since->ts - (ran - since->ran);

	if ((__s64)off >= (__s64)min_block_ns)
		charge(task, &since->wait, off, since->weight);
	since->ts = 0;
}

/* A target thread switches out: one event per thread (and the threads it
 * starts, which inherit it), the kernel's context-switch software event
 * counting every switch out of that thread (perf_event_task_sched_out(),
 * run in the thread before the switch). Another process's switches run
 * nothing, where the scheduler's tracepoint ran a program on every switch
 * of the machine.
 *
 * The thread's last wait, if any, ended when it was switched back in:
 * charged now (end_wait()). Then, if it blocks (or is preempted, when
 * those count), its Lua stack is walked here, while its memory is the
 * current one, and the wait is noted in its task's storage.
 *
 * A process started by a target inherits its events; when it is a target
 * too (--children) it has its own as well: two events see one switch.
 * The thread's count of switches (nvcsw + nivcsw, counted before the
 * switch) tells the second one, which would walk the stack again and
 * charge a wait of the few µs since the first. */
SEC("perf_event")
int on_switch_out(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 zero = 0, pid = view_tgid(task), every;
	struct nupp_off_since *since;
	struct switch_scratch *ss;
	struct sampler_scratch *sc;
	const struct pt_regs *regs;
	struct nupp_proc *p;
	__u64 now, ran, switches, *n;
	bool blocked;
	__s32 syscall;

	if (!(p = proc_of(pid)))
		return 0;	/* an inherited event, in a process of no target */
	since = bpf_task_storage_get(&off_since, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!since)
		return 0;
	switches = task->nvcsw + task->nivcsw;
	if (since->switches == switches)
		return 0;	/* seen by the thread's other event */
	since->switches = switches;
	now = bpf_ktime_get_ns();
	ran = task->se.sum_exec_runtime;
	if (since->ts)
		end_wait(task, since, now, ran);
	blocked = task_blocked(task);
	if (!blocked && !include_preempted)
		return 0;
	every = switch_every;
	if (every > 1 && bpf_get_prandom_u32() % every)
		return 0;
	if ((n = bpf_map_lookup_elem(&walked, &zero)))
		*n += 1;
	if (!(sc = scratch_for(task, pid)) || !(ss = bpf_map_lookup_elem(&switch_scratch, &zero)))
		return 0;
	regs = (const struct pt_regs *)bpf_task_pt_regs(task);
	VM_REGS(sc->regs, regs);
	sample(p, sc, true);	/* counted when the wait ends */
	now = bpf_ktime_get_ns();	/* the wait begins after the walk */
	syscall = (__s32)BPF_CORE_READ(regs, orig_ax);
	note_wait(ss, sc, now, syscall < 0 ? -1 : syscall, wait_channel(ctx, ss), !blocked, every);
	ss->since.ran = ran;
	ss->since.switches = switches;
	/* Looked up again: the walk's registers and calls lie between. */
	since = bpf_task_storage_get(&off_since, task, 0, 0);
	if (since)
		*since = ss->since;
	return 0;
}

/* A target thread exits: its events are gone before its last switch, so
 * its last wait, which it has come back from (it runs), is charged here:
 * longer by what it ran since its last scheduler tick, if any (its
 * sum_exec_runtime is that old: 1/HZ at most). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_thread_exit, struct task_struct *task)
{
	struct nupp_off_since *since = bpf_task_storage_get(&off_since, task, 0, 0);

	if (since && since->ts)
		end_wait(task, since, bpf_ktime_get_ns(), task->se.sum_exec_runtime);
	return 0;
}

/* The sampled off-CPU clock (--off-cpu -F HZ): no program at a switch.
 * Userspace sweeps the machine's threads at about the rate asked (reading
 * the iterator sweep_off_cpu); each target thread found switched out is
 * charged the time since the sweep before (sweep_ns): an unbiased estimate
 * of its time off the CPU, whose cost to a target is not per switch but
 * per sweep that finds it waiting.
 *
 * The sweep cannot walk the thread's Lua stack: its memory is not the
 * current one, and a sweep may not sleep to read another process's. The
 * stack cannot change while the thread waits, though: the thread runs no
 * user code until it comes back. So the sweep notes the wait's kernel side
 * (system call, wait channel) and asks the kernel to run sweep_walk in the
 * thread when it next returns to user mode (BPF task work, Linux 6.18),
 * where the stack is walked as on a switch out and charged all the time
 * the sweeps saw. A thread still waiting when the session ends is charged
 * by userspace, to its kernel side alone (user/sampler/waits.c). */
volatile __u64 sweep_ns;	/* set by userspace before each sweep: the time since the last */

/* In every build, so that userspace's skeleton has it: only the programs
 * need BPF task work. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u32);			/* the thread's kernel tid */
	__type(value, struct nupp_sweep_seen);
} sweep_seen SEC(".maps");

#define PF_EXITING	0x00000004	/* include/linux/sched.h, stable since 2.6 */

/* Both objects the Makefile builds from this file hold the sweep, so that
 * their globals lie alike (the Makefile checks it): userspace opens the
 * one with the kfunc (NUPP_SWEEP_WALKS, where the kernel has BPF task
 * work) through the other's skeleton. Only that one walks. */
#ifdef NUPP_SWEEP_WALKS
extern int bpf_task_work_schedule_resume_impl(struct task_struct *task, struct bpf_task_work *tw,
					      void *map__map, bpf_task_work_callback_t callback,
					      void *aux__prog) __ksym __weak;
#endif

#ifdef NUPP_SWEEP_WALKS
/* A target thread back from a wait some sweeps saw, in its own context on
 * its way to user mode (task work: may sleep, and another thread's walk on
 * this CPU may come between; the scratch's owner tells). */
static int sweep_walk(struct bpf_map *map, void *key, void *value)
{
	struct nupp_sweep_seen *e = value;
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 zero = 0, pid = view_tgid(task);
	struct nupp_proc *p = proc_of(pid);
	struct switch_scratch *ss;
	struct sampler_scratch *sc;
	__u64 ns, owner;

	e->pending = 0;		/* a sweep from now on asks again */
	ns = __sync_lock_test_and_set(&e->ns, 0);
	if (!p || !ns || *(__u32 *)key != task->pid)
		return 0;
	if (!(sc = scratch_for(task, pid)) || !(ss = bpf_map_lookup_elem(&switch_scratch, &zero)))
		return 0;
	owner = ss->owner = ((__u64)bpf_get_prandom_u32() << 32) | task->pid;
	VM_REGS(sc->regs, (const struct pt_regs *)bpf_task_pt_regs(task));
	sample(p, sc, true);	/* counted by charge() */
	note_wait(ss, sc, 0, e->wait.syscall, e->wait.wchan, e->wait.preempted, 1);
	if (ss->owner != owner)
		return 0;	/* another walk took the scratch meanwhile: its stack is not ours */
	charge(task, &ss->since.wait, ns, 1);
	return 0;
}
#endif

/* One thread of the machine, in a sweep. */
SEC("iter.s/task")
int sweep_off_cpu(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct nupp_sweep_seen *e, fresh = {};
	const struct pt_regs *regs;
	struct switch_scratch *ss;
	__u32 tid, zero = 0;
	__u64 switches;
	__s32 syscall;
	bool blocked;

	/* Running, or exiting (a zombie stays listed until reaped, its
	 * stack gone): no wait of the program's. */
	if (!task || paused || task->on_cpu || task->exit_state || (task->flags & PF_EXITING) ||
	    !proc_of(view_tgid(task)))
		return 0;
	blocked = task_blocked(task);
	if (!blocked && !include_preempted)
		return 0;
	tid = task->pid;
	if (!(e = bpf_map_lookup_elem(&sweep_seen, &tid))) {
		bpf_map_update_elem(&sweep_seen, &tid, &fresh, BPF_NOEXIST);
		if (!(e = bpf_map_lookup_elem(&sweep_seen, &tid)))
			return 0;
	}
	__sync_fetch_and_add(&e->ns, sweep_ns);
	switches = task->nvcsw + task->nivcsw;
	if (e->pending && e->switches == switches)
		return 0;	/* the wait a walk is already asked for */
	e->switches = switches;
	if (!(ss = bpf_map_lookup_elem(&switch_scratch, &zero)))
		return 0;
	regs = (const struct pt_regs *)bpf_task_pt_regs(task);
	syscall = (__s32)BPF_CORE_READ(regs, orig_ax);
	e->wait.syscall = syscall < 0 ? -1 : syscall;
	e->wait.preempted = !blocked;
	e->wait.wchan = task_wait_channel(task, ss);
	e->pid = view_tgid(task);
	e->tid = view_tid(task);
#ifdef NUPP_SWEEP_WALKS
	if (!e->pending && !bpf_task_work_schedule_resume_impl(task, &e->tw, &sweep_seen,
							       sweep_walk, NULL))
		e->pending = 1;
#endif
	return 0;
}

/* Coroutine waits (--waits): a coroutine that yields waits until it is
 * resumed, while its thread runs other coroutines or sleeps in an event
 * loop. At the yield its stack is walked (it is the running coroutine) and
 * noted by coroutine; at its resume the time since is charged as a wait.
 * Two ways to yield and resume, probed alike:
 * - from C, as OpenResty's cosocket operations and ngx.sleep do (lua_yield)
 *   and its event loop does (lua_resume): plain uprobes at the two API
 *   functions' entries, the lua_State their first argument. Neither is
 *   unwound through by LuaJIT (a yield across them returns normally to
 *   their C caller);
 * - from Lua, as fiber schedulers do: coroutine.yield, coroutine.resume and
 *   coroutine.wrap's functions, fast functions of the VM's assembly, probed
 *   on a conditional jump where rbp holds the coroutine's lua_State
 *   (user/luajit/vm_coroutines.c). Their probes carry the cookie
 *   NUPP_CO_IN_RBP.
 * A coroutine yielded one way may be resumed the other: both key it alike. */
struct co_key {
	__u32 pid;		/* the process: lua_State addresses are per process */
	__u32 pad;
	__u64 L;		/* the coroutine's lua_State */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct co_key);
	__type(value, struct nupp_off_since);
} co_since SEC(".maps");

/* Whether a yield or resume probe sits in the VM's fast function (the
 * coroutine in rbp) rather than on a C function's entry (its first argument). */
static __always_inline bool probe_in_vm(struct pt_regs *ctx)
{
	return bpf_get_attach_cookie(ctx) == NUPP_CO_IN_RBP;
}

/* The coroutine a yield or resume probe names. */
static __always_inline __u64 probed_coroutine(struct pt_regs *ctx, bool in_vm)
{
	return in_vm ? PT_REGS_FP(ctx) & LJ_GCVMASK : PT_REGS_PARM1(ctx);
}

SEC("uprobe")
int on_yield(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 zero = 0, pid = view_tgid(task);
	struct nupp_proc *p = proc_of(pid);
	bool in_vm = probe_in_vm(ctx);
	struct co_key key = { .pid = pid, .L = probed_coroutine(ctx, in_vm) };
	struct switch_scratch *ss;
	struct sampler_scratch *sc;
	__u64 cframe = 0;

	if (!p)
		return 0;
	/* coroutine.yield outside a resumable coroutine (the main thread, or
	 * across a C call) raises an error instead: no wait. */
	if (in_vm && (LJ_READ(&cframe, 8, key.L + p->lj.L_cframe) || !(cframe & LJ_CFRAME_RESUME)))
		return 0;
	if (!(sc = scratch_for(task, pid)) || !(ss = bpf_map_lookup_elem(&switch_scratch, &zero)))
		return 0;
	VM_REGS(sc->regs, ctx);
	sample(p, sc, true);		/* counted at the resume */
	note_wait(ss, sc, bpf_ktime_get_ns(), NUPP_WAIT_COROUTINE, 0, 0, 1);
	bpf_map_update_elem(&co_since, &key, &ss->since, BPF_ANY);
	return 0;
}

SEC("uprobe")
int on_resume(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct co_key key = { .pid = view_tgid(task), .L = probed_coroutine(ctx, probe_in_vm(ctx)) };
	struct nupp_off_since *since = bpf_map_lookup_elem(&co_since, &key);
	__u64 now = bpf_ktime_get_ns();

	if (!since)
		return 0;
	if (now - since->ts >= min_block_ns)
		charge(task, &since->wait, now - since->ts, since->weight);
	bpf_map_delete_elem(&co_since, &key);
	return 0;
}

#endif /* NUPP_OFFCPU_H */
