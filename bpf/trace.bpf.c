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
 * location the vmevent will carry is found here, as trace_abort() finds
 * it, and named (chunk name, line) while the target lives. The
 * instruction probed is a jcc, which the kernel emulates instead of
 * single-stepping (see kernel-notes/trace-abort.md).
 *
 * No uretprobe anywhere: the recorder unwinds through these frames.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "trace_abi.h"
#include "pid_view.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* tgid -> what the probe needs to know about that process */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_MAX_PLACES);
	__type(key, __u32);
	__type(value, struct nupp_trace_proc);
} procs SEC(".maps");

volatile __u32 paused;	/* set by userspace: nothing is read or reported */

/* One struct nupp_trace_event an abort, to userspace (which drains it at each
 * wake of the session). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

#define NUPP_COUNTERS NUPP_TRC_MAX	/* enum nupp_trace_counter */
#include "counters.h"

#define RD(dst, addr) bpf_probe_read_user(&(dst), sizeof(dst), (const void *)(addr))

/* Per-CPU scratch: the blocks of target memory an abort reads at once
 * (struct nupp_trace_proc says where), too big for the BPF stack. */
struct abort_scratch {
	__u8 jlo[NUPP_TJ_BLK + 8];	/* jit_State: the current trace, the recorder */
	__u8 jhi[NUPP_TJ_BLK + 8];	/* jit_State: parent, exitno, errinfo */
	__u8 L[NUPP_TL_BLK + 8];	/* the recording lua_State */
	__u8 pt[NUPP_TPT_BLK + 8];	/* the location's GCproto */
	__u8 fn[NUPP_TFN_BLK + 8];	/* a frame's GCfunc */
	__u8 str[NUPP_TSTR_BLK + 8];	/* the chunk name's GCstr */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct abort_scratch);
} scratch SEC(".maps");

/* Read the block [addr, + len) into buf of size max (a power of two): a
 * length in 1..max, in a form the verifier can bound. */
#define READ_BLK(buf, len, max, addr) \
	bpf_probe_read_user(buf, (((len) - 1) & ((max) - 1)) + 1, (const void *)(addr))
/* A field of jit_State at offset off, from its block. */
#define J_LO(p, sc, w, off)	lj_u##w##_at((sc)->jlo, (off) - (p)->j_lo, NUPP_TJ_BLK)
#define J_HI(p, sc, w, off)	lj_u##w##_at((sc)->jhi, (off) - (p)->j_hi, NUPP_TJ_BLK)
#define L_AT(p, sc, off)	lj_u64_at((sc)->L, (off) - (p)->L_blk, NUPP_TL_BLK)
#define PT_AT(pt, w, off)	lj_u##w##_at((pt), (off), NUPP_TPT_BLK)
#define FN_AT(sc, w, off)	lj_u##w##_at((sc)->fn, (off), NUPP_TFN_BLK)

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
 * trace_abort(); which one depends on the compiler, so try all of them,
 * the one that held it last time in this process first (p->j_reg: one
 * read, where each register tried costs one). */
static __always_inline __u64 find_J(struct nupp_trace_proc *p, struct pt_regs *regs)
{
	__u64 cand[6] = {
		regs->r15, regs->r14, regs->r13, regs->r12, regs->bp, regs->bx,
	};
	__u32 hint = p->j_reg;

	if (hint < 6 && cand[hint] && cand[hint] == p->last_J)
		return cand[hint];
	for (__u32 i = 0; i < 6; i++)
		if (is_jit_state(&p->lj, cand[i])) {
			p->j_reg = i;
			p->last_J = cand[i];
			return cand[i];
		}
	return 0;
}

/* proto_bcpos(pt, pc) as the int setintV() stores; bc is proto_bc(pt). */
static __always_inline __s32 bcpos(__u64 bc, __u64 pc)
{
	return (__s32)(__u32)((__s64)(pc - bc) >> 2);
}

/* frame_prev(f): the frame below f, whose link is link. */
static __always_inline int frame_prev(__u64 f, __u64 link, __u64 *prev)
{
	__u32 ins;

	if ((link & LJ_FRAME_TYPE) == LJ_FRAME_LUA) {
		if (RD(ins, link - 4))
			return -1;
		*prev = f - 8 * (2 + ((ins >> 8) & 0xff));	/* frame_prevl() */
	} else {
		*prev = f - (link & ~(__u64)LJ_FRAME_TYPEP);	/* frame_prevd() */
	}
	return 0;
}

/* One frame of LuaJIT's search (lj_trace.c trace_abort): from
 * J->L->base-1 down to the first Lua function; each frame passed sets pc
 * to its continuation's pc (a continuation frame) or its link (any other)
 * minus one instruction. A walk that reaches the bottom frame names that
 * frame's function, pos 0. A dummy frame's "function" is the thread, whose
 * dummy_ffid is FF_C. The walk is l->frame and l->pc; 1 when it has found
 * the function, 0 to go on, -1 on a read fault. A global function: the
 * verifier checks it once, not once for every turn of the walk. */
__noinline int lua_frame_step(const struct nupp_trace_proc *p, struct nupp_trace_event *e,
			      __u64 bot)
{
	const struct lj_layout *lj;
	struct nupp_trace_loc *l;
	struct abort_scratch *sc;
	__u64 f, link, prev, bc;
	__u32 zero = 0;

	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!p || !e || !sc)
		return -1;
	lj = &p->lj;
	l = &e->loc;
	f = l->frame;
	if (RD(l->fn, f - 8))
		return -1;
	l->fn &= LJ_GCVMASK;
	/* The function's header in one read: its ffid, and its pc or f. */
	if (READ_BLK(sc->fn, p->fn_len, NUPP_TFN_BLK, l->fn))
		return -1;
	l->ffid = FN_AT(sc, 8, lj->fn_ffid);
	if (l->ffid == 0) {
		bc = FN_AT(sc, 64, lj->fn_pc);
		l->pt = bc - lj->pt_size;
		l->pos = bcpos(bc, l->pc);
		return 1;
	}
	if (RD(link, f) || frame_prev(f, link, &prev))
		return -1;
	if (prev <= bot) {
		l->pos = 0;
		return 1;
	}
	if ((link & LJ_FRAME_TYPEP) == LJ_FRAME_CONT) {
		if (RD(l->pc, f - 16))	/* frame_contpc() */
			return -1;
	} else {
		l->pc = link;		/* frame_pc() */
	}
	l->pc -= 4;
	l->frame = prev;
	return 0;
}

/* One frame of luajit2's lj_debug_frame(L, 0) (2019-02 to 2023-10): the
 * first frame below J->L->base that is no dummy frame. The walk is l->frame,
 * and lj_debug_frame()'s level, kept in l->pos until the walk ends. */
__noinline int debug_frame_step(const struct lj_layout *lj, struct nupp_trace_event *e, __u64 bot)
{
	struct nupp_trace_loc *l;
	__u64 f, link;

	if (!lj || !e)
		return -1;
	l = &e->loc;
	f = l->frame;
	if (f <= bot || RD(l->fn, f - 8))
		return -1;
	l->fn &= LJ_GCVMASK;
	if (l->fn == e->L)
		l->pos++;	/* skip dummy frames */
	if (l->pos-- == 0)
		return RD(l->ffid, l->fn + lj->fn_ffid) ? -1 : 1;
	if (RD(link, f) || frame_prev(f, link, &l->frame))
		return -1;
	if ((link & LJ_FRAME_TYPEP) == LJ_FRAME_VARG)
		l->pos++;	/* skip the vararg pseudo-frame */
	return 0;
}

/* The frame's function and pos as luajit2 names them: proto_bcpos(J->pc)
 * for the Lua frame at base-1, else lj_debug_framepc(L, fn, frame). Of the
 * latter, the PC of a Lua frame under a C frame (found through the C frame
 * chain) and the undoing of a JLOOP's exit are not reproduced: NO_BCPOS. */
static __always_inline int debug_frame_pos(const struct lj_layout *lj, struct nupp_trace_event *e,
					   __u64 base)
{
	struct nupp_trace_loc *l = &e->loc;
	__u64 link, bc, ins = 0;
	__u32 sizebc, pos;

	l->pos = -1;			/* NO_BCPOS */
	if (l->ffid != 0)
		return 0;
	if (RD(bc, l->fn + lj->fn_pc))
		return -1;
	l->pt = bc - lj->pt_size;
	if (l->frame == base - 8) {
		l->pos = bcpos(bc, e->pc);
		return 0;
	}
	if (RD(link, l->frame))
		return -1;
	if ((link & LJ_FRAME_TYPE) == LJ_FRAME_LUA)
		ins = link;
	else if ((link & LJ_FRAME_TYPEP) == LJ_FRAME_CONT && RD(ins, l->frame - 16))
		return -1;
	if (!ins || RD(sizebc, l->pt + lj->pt_sizebc))
		return 0;
	pos = (__u32)bcpos(bc, ins) - 1;
	if (pos <= sizebc)
		l->pos = (__s32)pos;
	return 0;
}

/* The frame the target's trace_abort() names, its function and pos. */
static __always_inline int find_location(const struct nupp_trace_proc *p, struct nupp_trace_event *e,
					 __u64 base, __u64 bot)
{
	int r = 0;

	e->loc.frame = base - 8;
	e->loc.pc = e->pc;
	e->loc.pos = 0;
	for (int i = 0; i < NUPP_TRACE_WALK && !r; i++)
		r = p->debug_frame ? debug_frame_step(&p->lj, e, bot) : lua_frame_step(p, e, bot);
	if (r != 1)
		return -1;
	return p->debug_frame ? debug_frame_pos(&p->lj, e, base) : 0;
}

/* lj_debug_line(pt, pos), and pt->firstline, from the GCproto's header in
 * pt (read by read_location). */
static __always_inline int proto_line(const struct lj_layout *lj, struct nupp_trace_loc *l,
				      const __u8 *pt)
{
	__u32 pos = (__u32)l->pos, sizebc = PT_AT(pt, 32, lj->pt_sizebc);
	__s32 numline = (__s32)PT_AT(pt, 32, lj->pt_numline);
	__u64 li = PT_AT(pt, 64, lj->pt_lineinfo);

	l->firstline = (__s32)PT_AT(pt, 32, lj->pt_firstline);
	l->line = 0;		/* lj_debug_line's answer for a position past the code */
	if (pos > sizebc || !li)
		return 0;
	if (pos == sizebc) {
		l->line = l->firstline + numline;
	} else if (pos == 0) {
		l->line = l->firstline;
	} else if (numline < 256) {
		__u8 d;

		if (RD(d, li + pos - 1))
			return -1;
		l->line = l->firstline + d;
	} else if (numline < 65536) {
		__u16 d;

		if (RD(d, li + 2ULL * (pos - 1)))
			return -1;
		l->line = l->firstline + d;
	} else {
		__u32 d;

		if (RD(d, li + 4ULL * (pos - 1)))
			return -1;
		l->line = l->firstline + d;
	}
	return 0;
}

/* The chunk name: all of it, or its first character and its end. */
static __always_inline int proto_name(const struct lj_layout *lj, struct nupp_trace_loc *l,
				      const __u8 *pt, struct abort_scratch *sc)
{
	__u64 s = PT_AT(pt, 64, lj->pt_chunkname);
	__u32 n, off = 0, hdr = lj->str_size & 63;

	s = (s & LJ_GCVMASK) + lj->str_size;
	/* The string's header and as much of a name as is kept, in one read;
	 * where that runs past the string's mapping, its header alone. */
	if (!READ_BLK(sc->str, hdr + NUPP_TRACE_NAME, NUPP_TSTR_BLK, s - lj->str_size)) {
		l->namelen = lj_u32_at(sc->str, lj->str_len, NUPP_TSTR_BLK);
		l->name0 = sc->str[hdr];
		n = l->namelen;
		if (n > 0 && n <= NUPP_TRACE_NAME)	/* the length in a form the verifier bounds */
			return bpf_probe_read_kernel(l->name, ((n - 1) & (NUPP_TRACE_NAME - 1)) + 1,
						     sc->str + hdr) ? -1 : 0;
	} else if (RD(l->namelen, s - lj->str_size + lj->str_len) || RD(l->name0, s)) {
		return -1;
	}
	n = l->namelen;
	if (n > NUPP_TRACE_NAME) {
		off = n - NUPP_TRACE_NAME;
		n = NUPP_TRACE_NAME;
	}
	if (n > 0 && n <= NUPP_TRACE_NAME && bpf_probe_read_user(l->name, n, (const void *)(s + off)))
		return -1;
	return 0;
}

/* The location the "abort" vmevent will carry, found the target's way, and
 * all that names it: the function may be collected, or the process gone,
 * before userspace reads the event. base and stack are J->L's. A global
 * function: the verifier checks it once, not once for every way the probe
 * reaches it. */
__noinline int read_location(const struct nupp_trace_proc *p, struct nupp_trace_event *e,
			     __u64 base, __u64 stack, struct abort_scratch *sc)
{
	const struct lj_layout *lj;
	struct nupp_trace_loc *l;
	__u64 bot = stack + 8;
	__u8 *pt;

	if (!p || !e || !sc)
		return -1;
	pt = sc->pt;
	lj = &p->lj;
	l = &e->loc;
	if (find_location(p, e, base, bot))
		return -1;
	if (l->ffid != 0) {
		if (RD(l->f, l->fn + lj->fn_f))
			return -1;
		l->have = NUPP_LOC_FN;
		return 0;
	}
	l->have = NUPP_LOC_FN;
	if (READ_BLK(pt, p->pt_len, NUPP_TPT_BLK, l->pt) || proto_line(lj, l, pt))
		return 0;
	l->have |= NUPP_LOC_PROTO;
	if (!proto_name(lj, l, pt, sc))
		l->have |= NUPP_LOC_NAME;
	return 0;
}

/* The TValue at addr, into *tv: the GC object it refers to when its type
 * tag is itype, else 0. */
static __always_inline __u64 read_gcref(__u64 *tv, __u64 addr, __u32 itype)
{
	if (RD(*tv, addr) || (__u32)((__s64)*tv >> 47) != itype)
		return 0;
	return *tv & LJ_GCVMASK;
}

/* The error object at L->top[-1]: a TraceError number, or a Lua value
 * (usually the message string of an error raised while recording). */
static __always_inline void read_errobj(const struct lj_layout *lj,
					struct nupp_trace_event *e, __u64 top)
{
	__u64 s = read_gcref(&e->errobj, top - 8, LJ_TSTR);
	__u32 n;

	if (!s || RD(e->msglen, s + lj->str_len))
		return;
	n = e->msglen < NUPP_TRACE_MSG ? e->msglen : NUPP_TRACE_MSG;
	if (n > 0 && n <= NUPP_TRACE_MSG)
		bpf_probe_read_user(e->msg, n, (const void *)(s + lj->str_size));
}

/* J->errinfo (in e->errinfo): the NYI detail. A function is named by
 * userspace; its ffid and C pointer are read now (a Lua function's name
 * would be read later). */
static __always_inline void read_errinfo(const struct lj_layout *lj,
					 struct nupp_trace_event *e)
{
	__u64 fn = e->errinfo & LJ_GCVMASK;

	e->info_ffid = 0xff;
	if ((__u32)((__s64)e->errinfo >> 47) != LJ_TFUNC || RD(e->info_ffid, fn + lj->fn_ffid))
		return;
	if (e->info_ffid != 0)
		RD(e->info_f, fn + lj->fn_f);
}

/* A target that executes another program loses the layout its entry
 * describes: the entry goes before the new program runs (userspace sees it
 * gone), and a probe hit of the new image, should it map the same file,
 * finds none. */
SEC("raw_tp/sched_process_exec")
int on_exec(void *ctx)
{
	__u32 pid = view_current_pid_tgid() >> 32;	/* the exec runs in the task */

	if (bpf_map_lookup_elem(&procs, &pid))	/* no bucket lock for other processes */
		bpf_map_delete_elem(&procs, &pid);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(trace_abort_site)
{
	__u64 pid_tgid = view_current_pid_tgid();
	__u32 pid = pid_tgid >> 32;
	struct nupp_trace_proc *p;
	const struct lj_layout *lj;
	struct nupp_trace_event *e;
	struct abort_scratch *sc;
	__u64 J, top, base, stack;
	__u32 zero = 0;
	__u16 traceno;

	p = bpf_map_lookup_elem(&procs, &pid);
	if (!p || paused)
		return 0;
	lj = &p->lj;
	count(NUPP_TRC_HITS);
	J = find_J(p, ctx);
	if (!J) {
		count(NUPP_TRC_NO_J);
		return 0;
	}
	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return 0;
	if (READ_BLK(sc->jlo, p->j_lo_len, NUPP_TJ_BLK, J + p->j_lo)) {
		count(NUPP_TRC_READ);
		return 0;
	}
	/* trace_abort() only reports an abort when a trace number was taken. */
	traceno = J_LO(p, sc, 16, lj->J_cur_traceno);
	if (!traceno) {
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
	e->L = J_LO(p, sc, 64, lj->J_L);
	e->pt = J_LO(p, sc, 64, lj->J_pt);
	e->pc = J_LO(p, sc, 64, lj->J_pc);
	e->startpt = J_LO(p, sc, 64, lj->J_cur_startpt) & LJ_GCVMASK;
	e->startpc = J_LO(p, sc, 64, lj->J_cur_startpc);
	e->startins = J_LO(p, sc, 32, lj->J_cur_startins);
	e->flags = J_LO(p, sc, 32, lj->J_flags);
	if (READ_BLK(sc->jhi, p->j_hi_len, NUPP_TJ_BLK, J + p->j_hi) ||
	    READ_BLK(sc->L, p->L_len, NUPP_TL_BLK, e->L + p->L_blk)) {
		count(NUPP_TRC_READ);
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	e->parent = J_HI(p, sc, 32, lj->J_parent);
	e->exitno = J_HI(p, sc, 32, lj->J_exitno);
	e->errinfo = J_HI(p, sc, 64, lj->J_errinfo);
	top = L_AT(p, sc, lj->L_top);
	base = L_AT(p, sc, lj->L_base);
	stack = L_AT(p, sc, lj->L_stack);
	if (e->startpc)
		RD(e->startins_now, e->startpc);
	read_errobj(lj, e, top);
	read_errinfo(lj, e);
	read_location(p, e, base, stack, sc);
	if (p->zone_cur)
		RD(e->zone, p->zone_cur);
	count(NUPP_TRC_EVENTS);
	/* A wakeup (~4 us here) only when the reader had read the ring empty
	 * (the ring's default): after a wake it drains again 10 ms later at
	 * the soonest (wake__wait, user/session/wake.c), so a burst costs 100 wakeups a second. */
	bpf_ringbuf_submit(e, 0);
	return 0;
}
