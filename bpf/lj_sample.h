/* SPDX-License-Identifier: MIT */
/*
 * lj_sample.h - where a sample's walk starts, and the walks: from a
 * thread's registers and its VM's fields to the frames of its Lua stack.
 *
 * Compiled into the BPF sampler (sampler.bpf.c), which finds the sample's VM
 * and counts the stack it gives, and, as plain C, into the replay test
 * (tests/unit/test_replay.c), which runs it over a process's registers and
 * memory captured once: the cases a live test meets by timing luck (a trace
 * stopped in an inlined callee, a frame returning) are replayed every run.
 * The includer defines LJ_READ (as for lj_walk.h), __noinline, and the
 * sampler's settings walk_turns (steps a walk may take) and leaf_pc
 * (--lines: the leaf's pc off trace too).
 */
#ifndef NUPP_LJ_SAMPLE_H
#define NUPP_LJ_SAMPLE_H

#include "lj_walk.h"

/* The target's user registers the sampler reads (kernel-notes/sampler.md, "LuaJIT facts"). */
struct vm_regs {
	__u64 ip;
	__u64 dispatch;		/* r14: DISPATCH */
	__u64 base;		/* rdx: BASE, in the interpreter */
	__u64 pc;		/* rbx: PC, in the interpreter (after the instruction),
				 * or the link of a frame returning */
	__u64 rbp;		/* RB: BASE saved around some calls out (sample()) */
	__u64 sp;		/* rsp: where a C helper a trace called finds its return */
};

/* Per-CPU scratch: what a sample works on, too big for the 512-byte BPF
 * stack, and what it keeps between helper calls, which would otherwise be
 * spilled to the stack (see struct lj_walk_mem). What every sample touches
 * comes first, together. */
struct sampler_scratch {
	struct nupp_stack_key key;
	struct vm_regs regs;
	__s32 vmstate;			/* g->vmstate */
	__u32 state;			/* enum nupp_state */
	__u64 start;			/* where a walk starts: a frame's base */
	__u64 L_base, L_maxstack, L_cframe;	/* the running lua_State's */
	__u64 first_start;		/* where the first walk started, */
	__s32 first_err;		/* and its enum nupp_err + 1 */
	__u64 below_link;		/* walk_from(): not 0, the link of the leaf, returning */
	__u64 leaf_link;		/* walk_elsewhere(): the link slot at rdx */
	__u8 ggblk[NUPP_GG_BLK + 8];	/* main lua_State and global_State fields */
	__u8 Lblk[NUPP_BLK + 8];	/* a coroutine's lua_State fields */
	struct lj_walk_mem walk;	/* the walk's state, buffers and caches (lj_walk.h) */
	__u64 stack_top[NUPP_RET_CHUNK];	/* trace_ip(): words from rsp on */
	/* Last: the fields above keep the offsets the sampler's code was
	 * tuned with (its stack stays under 64 bytes, test_bpf_objects.py). */
	__u32 slot;			/* the counts slot the stack was counted in */
	__u32 slot_pad;
	__u32 missed;			/* 0: counted in a slot; else the counter
					 * (enum nupp_counter) it went to, + 1 */
	__u32 missed_pad;
	__u32 ticks_left;		/* --clock tick below HZ: this CPU's
					 * targets' ticks to the next sample */
	__u32 ticks_pad;
};

/* A field of the GG_State block: at offset off of GG_State. */
#define GG_FIELD(p, ggblk, off)	lj_u64_at(ggblk, (off) - (p)->gg_blk, NUPP_GG_BLK)
/* A field of the running lua_State: from Lblk at offset off - Lfirst. The mask
 * is the larger block's; a coroutine's block is NUPP_BLK long, and userspace
 * keeps the lua_State offsets within it (block_of in user/sampler/sampler.c). */
#define L_FIELD(Lblk, Lfirst, off)	lj_u64_at(Lblk, (off) - (Lfirst), NUPP_GG_BLK)

/* Where the walk starts: the running function's base in each VM state
 * (kernel-notes/sampler.md, "LuaJIT facts"); L->base is stale while bytecode or a trace runs.
 * The leaf's pc is set apart (sample()): a frame's pc only names its callee,
 * and the leaf has none, so it is kept only where it tells more (on trace,
 * and with --lines); a key without it is shared by every sample of the stack.
 * ggblk holds the GG_State's fields; the running lua_State's lie in Lblk from
 * its offset Lfirst on (the main one's are in ggblk too). */
static __always_inline __u64 walk_base(const struct nupp_proc *p, const struct vm_regs *regs,
				       __s32 vmstate, const __u8 *ggblk, const __u8 *Lblk,
				       __u32 Lfirst)
{
	const struct lj_layout *lj = &p->lj;
	bool base_in_rdx = regs->ip >= p->vm_lo && regs->ip < p->vm_hi &&
			   regs->base > L_FIELD(Lblk, Lfirst, lj->L_stack) + 16 &&
			   regs->base <= L_FIELD(Lblk, Lfirst, lj->L_maxstack);
	__u64 jit_base;

	/* On trace: BASE at trace entry, in the frame of the function where
	 * the trace started (frames inlined into it do not exist in memory).
	 * A trace that leaves for the interpreter jumps to ->vm_exit_interp,
	 * which clears jit_base one instruction before it sets vmstate to
	 * INTERP: there BASE is in rdx already (recurse.lua's fib: 0.5 % of
	 * its samples, walked from 0 as read faults). */
	if (vmstate >= 0) {
		jit_base = GG_FIELD(p, ggblk, lj->gg_g + lj->g_jit_base);
		if (jit_base || !base_in_rdx)
			return jit_base;
		return regs->base;
	}
	/* In the interpreter, BASE is rdx. Around a call out of the VM, rdx holds
	 * an argument (CARG3) or what the callee left, and the VM synced L->base
	 * before the call: a value outside the thread's stack is not BASE. */
	if (vmstate == LJ_VMST_INTERP && base_in_rdx)
		return regs->base;
	/* C function, GC, recorder, or a helper called by the VM: the VM synced
	 * L->base before calling out. */
	return L_FIELD(Lblk, Lfirst, lj->L_base);
}

/* Whether a lies in a file's code near the interpreter (p->code: LuaJIT's
 * C code, which holds the interpreter, the C library...), which is no
 * trace's. */
static __always_inline bool in_file_code(const struct nupp_proc *p, __u64 a)
{
	for (__u32 i = 0; i < NUPP_CODE_RANGES && p->code[i].hi; i++)
		if (a - p->code[i].lo < p->code[i].hi - p->code[i].lo)
			return true;
	return false;
}

/* Whether a may be trace code: within +-2 GiB of the interpreter (where
 * LuaJIT allocates it, near lj_vm_exit_handler), in no file's code. */
static __always_inline bool near_trace_code(const struct nupp_proc *p, __u64 a)
{
	__s64 off = (__s64)(a - p->vm_lo);

	return off == (__s32)off && a - p->vm_lo >= p->vm_hi - p->vm_lo && !in_file_code(p, a);
}

/* The code of trace n of the VM whose GG_State is at GG: J->trace[n]'s
 * mcode and szmcode, into lo and len. -1 where the build's layout has no
 * trace fields (revisions before 2021-03) or a read fails. */
static __always_inline int trace_code(const struct nupp_proc *p, __u64 GG, __u32 n, __u64 *lo,
				      __u32 *len)
{
	const struct lj_layout *lj = &p->lj;
	__u64 traces, tr;

	if (!lj->tr_mcode || !lj->J_trace ||
	    LJ_READ(&traces, 8, GG + lj->gg_j + lj->J_trace) ||
	    LJ_READ(&tr, 8, traces + 8 * (__u64)n))
		return -1;
	tr &= LJ_GCVMASK;
	if (!tr || LJ_READ(lo, 8, tr + lj->tr_mcode) || LJ_READ(len, 4, tr + lj->tr_szmcode))
		return -1;
	return 0;
}

/* A root trace's head, before it stores its number in g->vmstate: the
 * interpreter jumped there (BC_JLOOP, BC_JFUNCF) with jit_base set and
 * vmstate still INTERP, and L->base stale. The head adjusts the stack or
 * not and then stores the number (asm_head_root: `sub rsp, imm8` or
 * `sub rsp, imm32`, then `mov dword [r14 + disp2g + vmstate], n`). Decoded
 * here, and trace n's code must hold ip: the sample is that trace's, at
 * its start. The number, else LJ_VMST_INTERP. recurse.lua's fib, where the
 * jump into a far trace stalls on its first instruction: up to 16 samples
 * a run (0.5 %), walked from the stale L->base as read faults. A function
 * of its own, its bytes in the scratch (sc->stack_top, which trace_ip()
 * fills later): the sampler's stack stays off the private one. */
__noinline __s32 trace_head_at(const struct nupp_proc *p, struct sampler_scratch *sc, __u64 GG)
{
	__u8 *c, *st;
	__s32 disp;
	__u32 n, len;
	__u64 lo, ip;

	if (!p || !sc)
		return LJ_VMST_INTERP;
	c = (__u8 *)sc->stack_top;
	st = c;
	ip = sc->regs.ip;
	if (LJ_READ(c, 18, ip))
		return LJ_VMST_INTERP;
	if (c[0] == 0x48 && c[1] == 0x83 && c[2] == 0xec)
		st = c + 4;
	else if (c[0] == 0x48 && c[1] == 0x81 && c[2] == 0xec)
		st = c + 7;
	if (st[0] != 0x41 || st[1] != 0xc7 || st[2] != 0x86)
		return LJ_VMST_INTERP;
	__builtin_memcpy(&disp, st + 3, 4);
	__builtin_memcpy(&n, st + 7, 4);
	if (disp != p->lj.disp2g + (__s32)p->lj.g_vmstate || !n || n > 0xffff ||
	    trace_code(p, GG, n, &lo, &len) || ip - lo >= len)
		return LJ_VMST_INTERP;
	return (__s32)n;
}

/* Where the running trace (g->vmstate) was interrupted: an address for
 * userspace to map through its snapshots, 0 none. The trace's code
 * (J->trace[vmstate]'s [mcode, mcode + szmcode), four reads) decides:
 * - in the interpreter: the address, which userspace tells apart;
 * - inside it: the interrupted address;
 * - elsewhere, C code the trace called (lj_tab_new1, lj_str_new, memcpy:
 *   LuaJIT's own or the C library's, in the state of the trace): the
 *   position is the call before the helper's return address into the
 *   trace, the first word from rsp on that points just past a byte of its
 *   code. Nearness to the interpreter is not enough: the C stack holds
 *   pointers to LuaJIT's heap, which lies near it too (nginx's allocating
 *   handler had 87 % of its compiled samples unmapped so), and a program
 *   maps more libraries near it than nupp_proc.code[] lists (pdns_recursor
 *   had libc's memmove taken for trace code);
 * - else, an address near the interpreter in no file's code listed: the
 *   code of another trace, which vmstate does not name yet (a trace linked
 *   to it sets vmstate in its first instruction: userspace finds it there).
 * Where the layout has no trace fields (revisions before 2021-03), the
 * first word near trace code is taken as the return, and the mapper checks
 * it against the trace. The stack is read a chunk at a time, each within
 * one aligned block of sizeof(stack_top) bytes, hence within one page: a
 * read that crossed the end of the stack's mapping would fail whole (a
 * main thread whose rsp lies close to its stack's top lost every such
 * sample). A function of its own, whose stack is not the program's (see
 * kernel-notes/sampler.md, the private stack). */
__noinline __u64 trace_ip(const struct nupp_proc *p, struct sampler_scratch *sc)
{
	const __u64 chunk = sizeof(sc->stack_top);
	__u64 lo = 0, at, ip;
	__u32 len = 0;
	bool known;

	if (!p || !sc)
		return 0;
	ip = sc->regs.ip;
	/* The interpreter, leaving the trace: the exit handler before it sets
	 * vmstate EXIT, ->vm_exit_interp (a trace that links to the
	 * interpreter jumps there) before INTERP. Userspace counts these. */
	if (ip - p->vm_lo < p->vm_hi - p->vm_lo)
		return ip;
	known = sc->vmstate >= 0 &&
		!trace_code(p, sc->key.g - p->lj.gg_g, (__u32)sc->vmstate, &lo, &len);
	if (known && ip - lo < len)
		return ip;
	if (known || !near_trace_code(p, ip)) {
		at = sc->regs.sp & ~7ULL;
		for (__u32 c = 0; c < NUPP_RET_SCAN / NUPP_RET_CHUNK; c++) {
			__u64 n = chunk - (at & (chunk - 1));	/* 8..chunk bytes */

			if (LJ_READ(sc->stack_top, n, at))
				break;
			for (__u32 i = 0; i < NUPP_RET_CHUNK && i < n / 8; i++) {
				__u64 a = sc->stack_top[i];

				if (known ? a - 1 - lo < len : near_trace_code(p, a))
					return a - 1;
			}
			at += n;
		}
	}
	return near_trace_code(p, ip) ? ip : 0;
}

/* The leaf's pc on trace (NUPP_PC_TRACE in bpf/sampler_abi.h): the trace and
 * where its code was interrupted (trace_ip), for userspace to map through
 * the trace's snapshots; 0 nothing to map. */
static __always_inline __u64 trace_pos(const struct nupp_proc *p, struct sampler_scratch *sc,
				       __s32 vmstate)
{
	__u64 ip = trace_ip(p, sc);
	__s64 off = (__s64)(ip - p->vm_lo);

	if (!ip || off != (__s32)off || vmstate > 0xffff)
		return 0;
	return NUPP_PC_TRACE_MAKE(vmstate, off);
}

/* --lines, off trace: the leaf's current pc, into w->pc (0 unknown).
 * Bytecode in the interpreter: its PC register (rbx), where BASE came from
 * rdx. Elsewhere the VM saved it in its C frame (SAVE_PC) before calling out
 * (GC, recorder, helpers): one read. In a C function the leaf is that
 * function, which has no pc. Userspace keeps only a pc inside the leaf's
 * bytecode. */
static __always_inline void leaf_pc_of(const struct nupp_proc *p, struct sampler_scratch *sc)
{
	struct lj_walk *w = &sc->walk.w;
	__u64 cf;

	if (sc->vmstate == LJ_VMST_INTERP && sc->start == sc->regs.base &&
	    sc->regs.ip - p->vm_lo < p->vm_hi - p->vm_lo) {
		w->pc = sc->regs.pc & LJ_GCVMASK & ~(__u64)NUPP_CALL_MASK;
		return;
	}
	if (sc->vmstate == LJ_VMST_C)
		return;
	cf = sc->L_cframe & LJ_CFRAME_RAWMASK;
	if (!cf || LJ_READ(&w->pc, 8, cf + LJ_CFRAME_OFS_PC))
		w->pc = 0;
	w->pc &= LJ_GCVMASK & ~(__u64)NUPP_CALL_MASK;
}

/* Steps of a walk per call of walk_steps(): a walk at the default --depth
 * takes two calls (~12 ns each), and the verifier checks the batch in ~25 ms. */
#define WALK_BATCH	16

/* Up to WALK_BATCH steps of a walk: 1 once it stops. Global, not static: the
 * verifier checks a global function once, on its own, where it checks an
 * inlined loop turn by turn (0.13 s at --depth 16 and 0.36 s at --depth 64,
 * most of the time to attach, before the walk moved here). It sees m and lj
 * as memory of their types' sizes, which may be NULL. */
__noinline int walk_steps(struct lj_walk_mem *m, const struct lj_layout *lj)
{
	if (!m || !lj)
		return 1;
	for (int k = 0; k < WALK_BATCH; k++) {
		/* Opaque to the compiler in each turn, so that it does not hoist
		 * addresses derived from them out of the loop: live through the
		 * loop, they would be spilled to the stack. */
		asm volatile("" : "+r"(m), "+r"(lj));
		if (lj_walk_step(m, lj))
			return 1;
	}
	return 0;
}

/* Walk the thread's frames from sc->start into sc->walk, whose L, bot,
 * epoch and max are set; sc->key.truncated says whether frames were left.
 * 0, or enum nupp_err + 1. Global, not inlined: a sample may walk up to
 * three times (walk_elsewhere), and inlined thrice the walk's values were
 * spilled to the stack (72 bytes, see the table in kernel-notes/sampler.md).
 * The verifier sees p and sc as memory of their types' sizes, which may be
 * NULL. */
__noinline int walk_from(struct nupp_proc *p, struct sampler_scratch *sc)
{
	struct lj_walk *w;
	__u32 i;

	if (!p || !sc)
		return NUPP_ERR_BAD_BASE + 1;
	w = &sc->walk.w;
	/* A coroutine that yielded (lua_yield, coroutine.yield: lj_api.c and
	 * vm_x64.dasc clear L->cframe) is left in g->cur_L while the C code
	 * that resumed it runs on, in state C: that code is its resumer's,
	 * outside Lua (a host's event loop), not the coroutine's last frame.
	 * Here, not in sample_walk(): the sampler's own stack stays small. */
	if (lj_unlikely(!sc->L_cframe) && sc->vmstate == LJ_VMST_C)
		return NUPP_ERR_NO_FRAME + 1;

	w->f = sc->start - 8;	/* link slot */
	w->depth = 0;
	w->hash = 0;
	w->chunk_lo = 0;
	w->err = 0;
	w->next_id = 0;
	w->fill_pc = 0;
	w->pc = 0;
	if (lj_unlikely(w->f == w->bot))	/* an empty stack: a thread not started, or lua_close */
		return NUPP_ERR_NO_FRAME + 1;
	if (lj_unlikely(w->f < w->bot || w->f > sc->L_maxstack))
		return NUPP_ERR_BAD_BASE + 1;
	/* A frame returning: the walk starts at its caller (walk_elsewhere). */
	if (lj_unlikely(sc->below_link)) {
		w->link = sc->below_link;
		if ((w->link & LJ_FRAME_TYPE) == LJ_FRAME_LUA ? lj_walk_to_lua_caller(&sc->walk) :
		    lj_walk_to_frame_below(&sc->walk))
			return w->err ? w->err : NUPP_ERR_BAD_FRAME + 1;
		if (w->f <= w->bot)
			return NUPP_ERR_NO_FRAME + 1;
	}
	/* The leaf's pc, which walk_steps() records with its frame: on trace
	 * where its code runs, else (--lines) its bytecode. */
	if (sc->vmstate >= 0)
		w->pc = trace_pos(p, sc, sc->vmstate);
	else if (leaf_pc)
		leaf_pc_of(p, sc);
	/* A bounded loop of batches, not bpf_loop(), whose indirect call per
	 * turn costs more than a frame on this kernel. Its bound is rodata, a
	 * constant to the verifier. */
	for (i = 0; i < walk_turns; i += WALK_BATCH) {
		asm volatile("" : "+r"(sc), "+r"(p));	/* as in walk_steps() */
		if (walk_steps(&sc->walk, &p->lj))
			break;
	}
	if (lj_unlikely(w->err))
		return w->err;
	if (lj_unlikely(!w->depth))
		return NUPP_ERR_NO_FRAME + 1;
	/* More frames than --depth, or than the steps allowed reach. */
	sc->key.truncated = w->depth == w->max || i >= walk_turns;
	return 0;
}

/* A walk from the caller of the frame at rdx, which is returning, and whose
 * link the VM holds elsewhere than in its slot. 0, or enum nupp_err + 1. */
static __always_inline int walk_below_leaf(struct nupp_proc *p, struct sampler_scratch *sc,
					   __u64 link)
{
	int err;

	sc->start = sc->regs.base;
	sc->below_link = link;
	err = walk_from(p, sc);
	sc->below_link = 0;
	return err;
}

/* The interpreter keeps BASE in rdx, but not at every instruction, and
 * syncs L->base only before calls that may need it. A walk from where BASE
 * is not finds no frame there (err, enum nupp_err + 1); the other places
 * are tried in turn:
 * - coroutine.resume and a coroutine's wrapper hold BASE + 8 in rdx from
 *   storing L->base until lj_vm_resume loads the coroutine's;
 * - BC_LEN and BC_USETV call lj_tab_len and lj_gc_barrieruv with BASE saved
 *   in RB (rbp), a callee-saved register, and L->base stale; rdx is the
 *   callee's until restored from rbp after it.
 * - a frame returning (BC_RET*, a fast function's return, a continuation's
 *   dispatch) has its results copied over its own slots while its link is
 *   in PC (rbx): the walk starts at its caller, found from that link;
 * - coroutine.resume, returning, writes its first result (true or false)
 *   over its link slot before it loads PC back from SAVE_PC, in the VM's C
 *   frame (L->cframe): a link slot holding a tagged value is no link, and
 *   the link is there. Tried last, as SAVE_PC may be older elsewhere
 *   (coro_ring.lua: 9 of 519 samples, ip just after the store, the link a
 *   continuation's: the call was stitched to a trace).
 * tests/fixtures/corpus/: 19 of 25 read faults of coro_ring.lua, 27 of 34
 * unresolved samples of event_loop.lua, and 25 of 32 read faults left in
 * five programs after that (ip and slots recorded with a debug build of
 * the sampler, mapped with objdump). 0, or the first walk's err.
 * What lives across the walks is kept in sc (see struct sampler_scratch). */
static __always_inline int walk_elsewhere(struct nupp_proc *p, struct sampler_scratch *sc, int err)
{
	int in_vm = sc->regs.ip - p->vm_lo < p->vm_hi - p->vm_lo, returning = 0, slot_read;
	__u64 cf;

	sc->first_start = sc->start;
	sc->first_err = err;
	/* A frame returning one result (a fast function's, BC_RET1) wrote it
	 * over its func slot and keeps its link slot, which PC holds: its
	 * caller comes first. L->base is stale there, and a walk from it
	 * found the frames of an older call (mixed.lua on a build without
	 * the JIT: 2.7 % of samples named outer() for compiled();band, ip
	 * at ->fff_res_). */
	slot_read = in_vm && !LJ_READ(&sc->leaf_link, 8, sc->regs.base - 8);
	if (slot_read && sc->leaf_link == sc->regs.pc) {
		returning = 1;
		if (!walk_below_leaf(p, sc, sc->regs.pc))
			return 0;
	}
	if (sc->L_base != sc->first_start) {
		sc->start = sc->L_base;
		if (!walk_from(p, sc))
			return 0;
	}
	if (sc->regs.rbp != sc->first_start && sc->regs.rbp != sc->L_base) {
		sc->start = sc->regs.rbp;
		if (!walk_from(p, sc))
			return 0;
	}
	if (in_vm && !returning && !walk_below_leaf(p, sc, sc->regs.pc))
		return 0;
	cf = sc->L_cframe & LJ_CFRAME_RAWMASK;
	if (slot_read && sc->leaf_link > LJ_GCVMASK && cf &&
	    !LJ_READ(&sc->leaf_link, 8, cf + LJ_CFRAME_OFS_PC) && sc->leaf_link &&
	    !walk_below_leaf(p, sc, sc->leaf_link))
		return 0;
	return sc->first_err;
}

/* A sample's walk, once its VM is known (sc->key.g) and its registers are
 * in sc->regs: the VM's fields, the running thread's, the state, where the
 * walk starts and the walks; the frames are in sc->walk. 0, or enum
 * nupp_err + 1. */
static __always_inline int sample_walk(struct nupp_proc *p, struct sampler_scratch *sc)
{
	struct nupp_stack_key *key = &sc->key;
	struct lj_walk *w = &sc->walk.w;
	const __u8 *Lblk;
	__u64 GG, L;
	__u32 Lfirst;
	int err;

	/* The fields of the VM in one read, and a coroutine's in another.
	 * Lengths in 1..size, in a form the verifier can bound. */
	/* Every VM found was read when it was validated, and a live VM's
	 * GG_State stays mapped: one that cannot be read is gone (lua_close
	 * freed it, as a program's last moments do). */
	if (lj_unlikely(LJ_READ(sc->ggblk, ((p->gg_len - 1) & (NUPP_GG_BLK - 1)) + 1,
				key->g - p->lj.gg_g + p->gg_blk)))
		return NUPP_ERR_VM_CLOSED + 1;
	GG = key->g - p->lj.gg_g;
	sc->vmstate = (__s32)GG_FIELD(p, sc->ggblk, p->lj.gg_g + p->lj.g_vmstate);
	if (lj_unlikely(sc->vmstate == LJ_VMST_INTERP) && near_trace_code(p, sc->regs.ip))
		sc->vmstate = trace_head_at(p, sc, GG);
	sc->state = nupp_state_of(sc->vmstate);
	L = GG_FIELD(p, sc->ggblk, p->lj.gg_g + p->lj.g_cur_L) & LJ_GCVMASK;
	__builtin_memset(w, 0, sizeof(*w));
	w->L = L;
	if (L == GG) {				/* the main thread */
		Lblk = sc->ggblk;
		Lfirst = p->gg_blk;
	} else {
		if (!L || LJ_READ(sc->Lblk, ((p->L_len - 1) & (NUPP_BLK - 1)) + 1, L + p->L_blk))
			return NUPP_ERR_NO_THREAD + 1;
		Lblk = sc->Lblk;
		Lfirst = p->L_blk;
	}
	w->bot = L_FIELD(Lblk, Lfirst, p->lj.L_stack) + 8;
	sc->L_base = L_FIELD(Lblk, Lfirst, p->lj.L_base);
	sc->L_maxstack = L_FIELD(Lblk, Lfirst, p->lj.L_maxstack);
	sc->L_cframe = L_FIELD(Lblk, Lfirst, p->lj.L_cframe);
	w->epoch = p->gc_epoch;
	/* One frame more than shown: the caller names the outermost one. */
	w->max = p->max_frames;
	sc->start = walk_base(p, &sc->regs, sc->vmstate, sc->ggblk, Lblk, Lfirst);
	err = walk_from(p, sc);
	if (lj_unlikely(err && err != NUPP_ERR_NO_FRAME + 1) && sc->vmstate == LJ_VMST_INTERP)
		err = walk_elsewhere(p, sc, err);
	return err;
}

#endif /* NUPP_LJ_SAMPLE_H */
