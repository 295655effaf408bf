// SPDX-License-Identifier: MIT
/*
 * trace.bpf.c - LuaJIT trace aborts, one event per abort.
 *
 * One plain uprobe per target process, on the "if (traceno)" test of
 * trace_abort() (lj_trace.c; inlined into trace_state() in the Debian
 * builds). Every abort LuaJIT reports with a "abort" vmevent passes there,
 * whether the recorder raised it, a Lua error unwound through the recorder,
 * or the trace was aborted asynchronously; MCODELM retries leave before it,
 * exactly as they skip the vmevent. penalty_pc()/blacklist_pc() have run, so
 * the start instruction shows whether this abort blacklisted it. The
 * instruction probed is a jcc, which the kernel emulates instead of
 * single-stepping (see kernel-notes/trace-abort.md).
 *
 * No uretprobe anywhere: the recorder unwinds through these frames.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "trace.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* tgid -> what the probe needs to know about that process */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_MAX_PLACES);
	__type(key, __u32);
	__type(value, struct nupp_trace_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

volatile __u32 paused;	/* set by userspace: nothing is read or reported */

#define NUPP_COUNTERS NUPP_TRC_MAX	/* enum nupp_trace_counter */
#include "counters.h"

#define RD(dst, addr) bpf_probe_read_user(&(dst), sizeof(dst), (const void *)(addr))

/* Is v the address of a jit_State? It is when the GG_State around it holds
 * the main thread where g->mainthref says (the global_State signature). */
static __always_inline int is_jit_state(const struct lj_layout *lj, __u64 v)
{
	__u64 g, mainth;

	if (v < 4096 || (v & 7))
		return 0;
	g = v - lj->gg_j + lj->gg_g;
	if (RD(mainth, g + lj->g_mainthref))
		return 0;
	return (mainth & LJ_GCVMASK) == g - lj->gg_g;
}

/* trace_state() keeps J in a callee-saved register across the calls in
 * trace_abort(); which one depends on the compiler, so try all of them. */
static __always_inline __u64 find_J(const struct lj_layout *lj, struct pt_regs *regs)
{
	__u64 cand[6] = {
		regs->r15, regs->r14, regs->r13, regs->r12, regs->bp, regs->bx,
	};

	for (int i = 0; i < 6; i++)
		if (is_jit_state(lj, cand[i]))
			return cand[i];
	return 0;
}

/* Frames from J->L->base-1 downwards, raw (lj_debug_frame / trace_abort). */
static __always_inline void read_frames(const struct lj_layout *lj,
					struct nupp_trace_event *e, __u64 stack)
{
	__u64 f = e->base - 8, bot = stack + 8;

	for (int i = 0; i < NUPP_TRACE_FRAMES; i++) {
		struct nupp_trace_frame *fr = &e->frames[i];

		if (f <= bot)
			break;
		fr->slot = f;
		if (RD(fr->link, f) || RD(fr->func, f - 8))
			break;
		fr->func &= LJ_GCVMASK;
		fr->contpc = 0;
		fr->ffid = 0xff;
		if (fr->func != e->L && RD(fr->ffid, fr->func + lj->fn_ffid))
			break;
		if ((fr->link & LJ_FRAME_TYPEP) == LJ_FRAME_CONT && RD(fr->contpc, f - 16))
			break;
		e->nframes = i + 1;
		if (fr->ffid == 0 && fr->func != e->L)
			break;		/* the Lua frame the walk stops at */
		if ((fr->link & LJ_FRAME_TYPE) == LJ_FRAME_LUA) {
			__u32 ins;

			if (RD(ins, fr->link - 4))
				break;
			f -= 8 * (2 + ((ins >> 8) & 0xff));	/* frame_prevl() */
		} else {
			f -= fr->link & ~(__u64)LJ_FRAME_TYPEP;	/* frame_prevd() */
		}
	}
}

/* The error object at L->top[-1]: a TraceError number, or a Lua value
 * (usually the message string of an error raised while recording). */
static __always_inline void read_errobj(const struct lj_layout *lj,
					struct nupp_trace_event *e, __u64 top)
{
	__u64 s;
	__u32 n;

	if (RD(e->errobj, top - 8))
		return;
	if ((__u32)((__s64)e->errobj >> 47) != LJ_TSTR)
		return;
	s = e->errobj & LJ_GCVMASK;
	if (RD(e->msglen, s + lj->str_len))
		return;
	n = e->msglen < NUPP_TRACE_MSG ? e->msglen : NUPP_TRACE_MSG;
	if (n > 0 && n <= NUPP_TRACE_MSG)
		bpf_probe_read_user(e->msg, n, (const void *)(s + lj->str_size));
}

/* J->errinfo: the NYI detail. A function is named by userspace; its ffid
 * and C pointer are read now, the rest stays valid while the function does. */
static __always_inline void read_errinfo(const struct lj_layout *lj,
					 struct nupp_trace_event *e)
{
	__u64 fn;

	e->info_ffid = 0xff;
	if (RD(e->errinfo, e->J + lj->J_errinfo))
		return;
	if ((__u32)((__s64)e->errinfo >> 47) != LJ_TFUNC)
		return;
	fn = e->errinfo & LJ_GCVMASK;
	if (RD(e->info_ffid, fn + lj->fn_ffid))
		return;
	if (e->info_ffid == 1)
		RD(e->info_f, fn + lj->fn_f);
}

/* A target that executes another program loses the layout its entry
 * describes: the entry goes before the new program runs (userspace sees it
 * gone), and a probe hit of the new image, should it map the same file,
 * finds none. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 pid = task->tgid;

	if (bpf_map_lookup_elem(&procs, &pid))	/* no bucket lock for other processes */
		bpf_map_delete_elem(&procs, &pid);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(trace_abort_site)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32;
	const struct nupp_trace_proc *p;
	const struct lj_layout *lj;
	struct nupp_trace_event *e;
	__u64 J, top, stack;
	__u16 traceno;

	p = bpf_map_lookup_elem(&procs, &pid);
	if (!p || paused)
		return 0;
	lj = &p->lj;
	count(NUPP_TRC_HITS);
	J = find_J(lj, ctx);
	if (!J) {
		count(NUPP_TRC_NO_J);
		return 0;
	}
	/* trace_abort() only reports an abort when a trace number was taken. */
	if (RD(traceno, J + lj->J_cur_traceno) || !traceno) {
		count(NUPP_TRC_NO_TRACE);
		return 0;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(NUPP_TRC_RB_FULL);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->pid = pid;
	e->tid = (__u32)pid_tgid;
	e->ktime = bpf_ktime_get_ns();
	e->J = J;
	e->traceno = traceno;
	if (RD(e->L, J + lj->J_L) || RD(e->pt, J + lj->J_pt) || RD(e->pc, J + lj->J_pc) ||
	    RD(e->startpt, J + lj->J_cur_startpt) || RD(e->startpc, J + lj->J_cur_startpc) ||
	    RD(e->startins, J + lj->J_cur_startins) || RD(e->parent, J + lj->J_parent) ||
	    RD(e->exitno, J + lj->J_exitno) || RD(e->flags, J + lj->J_flags) ||
	    RD(top, e->L + lj->L_top) || RD(e->base, e->L + lj->L_base) ||
	    RD(stack, e->L + lj->L_stack)) {
		count(NUPP_TRC_READ);
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	e->startpt &= LJ_GCVMASK;
	if (e->startpc)
		RD(e->startins_now, e->startpc);
	read_errobj(lj, e, top);
	read_errinfo(lj, e);
	read_frames(lj, e, stack);
	if (p->zone_cur)
		RD(e->zone, p->zone_cur);
	count(NUPP_TRC_EVENTS);
	/* Aborts are rare, and the reader polls on a timer anyway: no wakeup. */
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}
