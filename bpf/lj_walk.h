/* SPDX-License-Identifier: MIT */
/*
 * lj_walk.h - one step of a LuaJIT (GC64, LJ_FR2) frame walk.
 *
 * Compiled into the BPF sampler and, as plain C, into the unit tests that walk
 * recorded or live memory. The includer defines
 *	int LJ_READ(void *dst, __u32 size, __u64 addr)	0 on success
 * The walk mirrors lj_debug_frame() (lj_debug.c): frames are addressed by
 * their link slot f = base - 1; dummy frames (func == L) and vararg
 * pseudo-frames are skipped, as dumpstack skips them.
 *
 * Reads are what a sample costs (each bpf_probe_read_user is 0.1-0.5 us on a
 * VM, whatever its size), so there are few of them: the Lua stack is read
 * LJ_CHUNK bytes at a time (one read covers many frames), and what a frame
 * needs beyond the stack - its function's header and, for a frame called from
 * Lua, the caller's CALL instruction - is looked up first in caches (struct
 * lj_memo), which turn a walk of known code into no reads.
 */
#ifndef NUPP_LJ_WALK_H
#define NUPP_LJ_WALK_H

#include "sampler_abi.h"

/* Branch hints: the compiler lays the likely path out straight, and a sample
 * runs on caches the target has made cold, where each line of code fetched
 * costs. */
#define lj_likely(x)	__builtin_expect(!!(x), 1)
#define lj_unlikely(x)	__builtin_expect(!!(x), 0)

#define LJ_CHUNK	1024	/* bytes of Lua stack read at once; a power of two */
#define LJ_HDR		64	/* bytes of a GCfunc header read at once */
#define LJ_ITYPE_FUNC	0x1fff7	/* LJ_TFUNC: a GC64 TValue's top 17 bits for a function */

/* The walk's caches, per CPU, set-associative by address (the newest entry of
 * a set first), hold what a walk learnt of an address of the target:
 *   call sites	by a Lua frame's return address (its link), the prototype
 *		whose bytecode holds it and operand A of the CALL before it
 *		(where the caller's frame lies);
 *   functions	by a GCfunc's address (a frame's func slot), what it runs
 *		(struct nupp_frame.fn).
 * Neither changes while the object lives, and LuaJIT frees objects only in
 * the sweep of a GC cycle, after its atomic phase. An object a walk finds in
 * use - on the running thread's stack - was reachable at the last atomic
 * phase or is younger than it, so that sweep keeps it: its memory can hold
 * something else only after a later atomic phase. The sampler bumps the
 * process's GC epoch there (a uprobe on lj_gc_separateudata, which the atomic
 * phase and lua_close call), which retires every entry at once. An epoch is
 * unique to one process and attachment, so entries need no pid. */
#define LJ_MEMO_WAYS	2
#define LJ_SITE_BITS	8
#define LJ_SITE_SETS	(1 << LJ_SITE_BITS)	/* sets of the call-site cache */
#define LJ_FN_BITS	6
#define LJ_FN_SETS	(1 << LJ_FN_BITS)	/* sets of the function cache */

struct lj_memo {
	__u64 addr;		/* 0 empty */
	__u64 epoch;		/* the process's GC epoch when filled */
	__u64 v;		/* call site: its GCproto; function: its identity */
	__u64 a;		/* call site: operand A of the CALL before it */
};

struct lj_memo_set {
	struct lj_memo way[LJ_MEMO_WAYS];
};

static __always_inline __u32 lj_memo_set_of(__u64 addr, unsigned bits)
{
	return ((__u32)(addr >> 2) * 0x9e3779b1u) >> (32 - bits);
}

/* The entry for addr valid at epoch, or NULL. */
static __always_inline const struct lj_memo *lj_memo_find(struct lj_memo_set *sets, unsigned bits,
							  __u64 addr, __u64 epoch)
{
	struct lj_memo_set *set = &sets[lj_memo_set_of(addr, bits)];

	if (set->way[0].addr == addr && set->way[0].epoch == epoch)
		return &set->way[0];
	if (set->way[1].addr == addr && set->way[1].epoch == epoch)
		return &set->way[1];
	return 0;
}

/* Remember what addr holds, the oldest entry of its set making room. */
static __always_inline void lj_memo_put(struct lj_memo_set *sets, unsigned bits, __u64 addr,
					__u64 epoch, __u64 v, __u64 a)
{
	struct lj_memo_set *set = &sets[lj_memo_set_of(addr, bits)];

	if (set->way[0].epoch == epoch)
		set->way[1] = set->way[0];
	set->way[0] = (struct lj_memo){ .addr = addr, .epoch = epoch, .v = v, .a = a };
}

/* The walk's state: plain numbers. The BPF sampler keeps it in map memory,
 * where the verifier does not track values, so that every turn of its loop
 * looks alike to the verifier instead of splitting into distinct states. */
struct lj_walk {
	__u64 L;		/* lua_State * whose stack is walked */
	__u64 f;		/* current frame's link slot */
	__u64 bot;		/* tvref(L->stack) + LJ_FR2: the walk ends here */
	__u64 pc;		/* current pc of the frame at f, 0 unknown */
	__u64 chunk_lo;		/* target address of the stack window, 0 when empty */
	__u32 depth;		/* frames emitted */
	__u32 max;		/* at most this many frames */
	__s32 err;		/* enum nupp_err + 1, 0 when fine */
	__u32 ins;		/* a CALL instruction read from the target */
	__u64 epoch;		/* the process's GC epoch; 0: no caches */
	__u64 next_id;		/* the next frame's identity, when known already; 0 unknown */
	__u64 fill_pc;		/* a site read but not yet cached: its pc, */
	__u64 fill_a;		/* and its CALL's operand A; the proto comes with the next frame */
	__u64 hash;		/* of the frames emitted, before lj_walk_hash_end */
	__u64 fn, link;		/* the current frame's func and link slots */
};

/* All a walk keeps: its state, the buffers it reads into and its caches, in
 * one block. One pointer reaches every part of it, so the BPF sampler (whose
 * block is per-CPU map memory) keeps no pointers on its stack and stays
 * under the 64 bytes above which this kernel moves a program's stack to a
 * per-CPU area (a page the timer interrupt has not just warmed). */
struct lj_walk_mem {
	struct lj_walk w;
	__u8 hdr[LJ_HDR + 8];			/* a GCfunc header */
	struct nupp_frame frames[NUPP_MAX_DEPTH];	/* the stack, innermost first */
	__u8 chunk[LJ_CHUNK + 16];		/* a window of the Lua stack */
	struct lj_memo recent[NUPP_MAX_DEPTH];	/* call sites: by depth, the last found there */
	struct lj_memo_set sites[LJ_SITE_SETS];	/* call sites */
	struct lj_memo_set fns[LJ_FN_SETS];	/* functions */
};


/* The frame's func and link slots (f - 8 and f) into w->fn and w->link,
 * through the stack window: refilled so that it ends just above f, and not
 * below the stack's start. */
static __always_inline int lj_walk_slots(struct lj_walk_mem *m)
{
	struct lj_walk *w = &m->w;
	__u64 off = w->f - 8 - w->chunk_lo;

	if (lj_unlikely(!w->chunk_lo || w->f - 8 < w->chunk_lo || off > LJ_CHUNK - 16)) {
		__u64 lo = w->f + 16 - LJ_CHUNK;

		if (w->f + 16 < LJ_CHUNK || lo < w->bot - 8)
			lo = w->bot - 8;
		if (lj_unlikely(LJ_READ(m->chunk, LJ_CHUNK, lo))) {
			/* The window ran off mapped memory (a small stack at
			 * the end of a mapping): read just these two slots. */
			w->chunk_lo = 0;
			if (LJ_READ(&w->fn, 8, w->f - 8) || LJ_READ(&w->link, 8, w->f))
				return -1;
			return 0;
		}
		w->chunk_lo = lo;
		off = w->f - 8 - lo;
	}
	w->fn = lj_u64_at(m->chunk, (__u32)off, LJ_CHUNK);
	w->link = lj_u64_at(m->chunk, (__u32)off + 8, LJ_CHUNK);
	return 0;
}

/* A 64-bit hash of frames: a cheap bijective step per word while walking,
 * and a strong mix at the end (the "moremur" mixer), so that structured
 * stacks spread over every bit. */
static __always_inline __u64 lj_walk_hash(__u64 h, __u64 x)
{
	h = (h ^ x) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

static __always_inline __u64 lj_walk_hash_end(__u64 h)
{
	h ^= h >> 27;
	h *= 0x3c79ac492ba7b653ULL;
	h ^= h >> 33;
	h *= 0x1c69b3f74ac4ae35ULL;
	return h ^ (h >> 27);
}

/* The walk's steps below keep what they need across a read in struct
 * lj_walk, not in locals, and load it back after: in the BPF sampler only m
 * and lj then live through a helper call, in callee-saved registers, and
 * nothing is spilled to the stack. */

/* The stable identity of the GCfunc in slot w->fn (struct nupp_frame.fn),
 * from its header; 0 when it cannot be read or is not a function (w->err
 * says which). */
static __always_inline __u64 lj_walk_fn_read(struct lj_walk_mem *m, const struct lj_layout *lj)
{
	struct lj_walk *w = &m->w;
	__u64 v;
	__u8 ffid;

	if (lj_unlikely(LJ_READ(m->hdr, LJ_HDR, w->fn & LJ_GCVMASK))) {
		w->err = NUPP_ERR_READ + 1;
		return 0;
	}
	/* A frame slot that does not hold a function: a stack being torn
	 * down (lua_close) or a wrong start frame. Stop rather than guess. */
	if (lj_unlikely(lj_u8_at(m->hdr, lj->gc_gct, LJ_HDR) != LJ_GCT_FUNC)) {
		w->err = NUPP_ERR_BAD_FRAME + 1;
		return 0;
	}
	ffid = lj_u8_at(m->hdr, lj->fn_ffid, LJ_HDR);
	if (ffid > 1)
		return NUPP_FN(NUPP_FN_FF, ffid);
	v = lj_u64_at(m->hdr, ffid ? lj->fn_f : lj->fn_pc, LJ_HDR);
	/* A Lua function's pc is proto_bc(pt): the bytecode follows the proto. */
	if (!ffid)
		v -= lj->pt_size;
	/* A C function or a proto lies in user memory: any other value is no
	 * function's (and would spill into the identity's kind bits). */
	if (lj_unlikely(v - 1 >= LJ_GCVMASK)) {
		w->err = NUPP_ERR_BAD_FRAME + 1;
		return 0;
	}
	return NUPP_FN(ffid ? NUPP_FN_C : NUPP_FN_LUA, v);
}

/* A slot tagged as a function holds one; a frame in use holds one. */
static __always_inline int lj_walk_tagged_fn(const struct lj_walk *w)
{
	return (w->fn >> 47) == LJ_ITYPE_FUNC;
}

/* The same, from the function cache when it can: only for a slot tagged as a
 * function, which a frame in use holds (struct lj_memo). */
static __always_inline __u64 lj_walk_fn_id(struct lj_walk_mem *m, const struct lj_layout *lj)
{
	const struct lj_memo *hit;
	__u64 id;

	if (!lj_walk_tagged_fn(&m->w) || !m->w.epoch)
		return lj_walk_fn_read(m, lj);
	hit = lj_memo_find(m->fns, LJ_FN_BITS, m->w.fn & LJ_GCVMASK, m->w.epoch);
	if (lj_likely(hit != 0))
		return hit->v;
	id = lj_walk_fn_read(m, lj);
	if (id)
		lj_memo_put(m->fns, LJ_FN_BITS, m->w.fn & LJ_GCVMASK, m->w.epoch, id, 0);
	return id;
}

/* Record the frame at w->f, whose slots are in w->fn and w->link. 0, or 1
 * when its function cannot be told. */
static __always_inline int lj_walk_emit(struct lj_walk_mem *m, const struct lj_layout *lj)
{
	struct lj_walk *w = &m->w;
	struct nupp_frame *fr;
	__u64 id = w->next_id, link;

	/* A cached identity needs the slot to hold a function still. */
	if (lj_unlikely(!id || !lj_walk_tagged_fn(w))) {
		id = lj_walk_fn_id(m, lj);
		if (lj_unlikely(!id))
			return 1;
		if (w->fill_pc && w->fill_pc == w->pc && NUPP_FN_KIND(id) == NUPP_FN_LUA)
			lj_memo_put(m->sites, LJ_SITE_BITS, w->pc, w->epoch, NUPP_FN_VALUE(id),
				    w->fill_a);
	}
	link = w->link;
	fr = &m->frames[w->depth & (NUPP_MAX_DEPTH - 1)];
	fr->fn = id;
	/* A pc holds its call kind in bits an instruction's address leaves
	 * clear; a continuation's pc read from a torn stack may not. */
	fr->pc = (w->pc & ~(__u64)NUPP_CALL_MASK) | ((link & LJ_FRAME_TYPE) == LJ_FRAME_LUA ? NUPP_CALL_LUA :
			  (link & LJ_FRAME_TYPEP) == LJ_FRAME_CONT ? NUPP_CALL_CONT :
			  NUPP_CALL_OTHER);
	w->hash = lj_walk_hash(lj_walk_hash(w->hash, fr->fn), fr->pc);
	w->depth++;
	return 0;
}

/* frame_prevl(): the frame below one called from Lua. The caller's CALL
 * instruction, just before the return address (the link), holds its base
 * register A; the callee's frame sits 2 + A slots above the caller's. */
static __always_inline int lj_walk_to_lua_caller(struct lj_walk_mem *m)
{
	struct lj_walk *w = &m->w;
	const struct lj_memo *st = 0;
	struct lj_memo *rc;
	__u64 a;

	/* A Lua caller is a frame left: no need to find it past --depth. */
	if (lj_unlikely(w->depth >= w->max))
		return 1;
	rc = &m->recent[w->depth & (NUPP_MAX_DEPTH - 1)];
	if (w->epoch) {
		if (rc->addr == w->link && rc->epoch == w->epoch)
			st = rc;
		else if ((st = lj_memo_find(m->sites, LJ_SITE_BITS, w->link, w->epoch)))
			*rc = *st;
	}
	if (lj_likely(st != 0)) {
		a = st->a;
		w->next_id = NUPP_FN(NUPP_FN_LUA, st->v);
	} else {
		if (lj_unlikely(LJ_READ(&w->ins, 4, w->link - 4))) {
			w->err = NUPP_ERR_READ + 1;
			return 1;
		}
		a = (w->ins >> 8) & 0xff;
		if (w->epoch) {
			w->fill_pc = w->link;
			w->fill_a = a;
		}
	}
	w->pc = w->link;
	w->f -= 8 * (2 + a);
	return 0;
}

/* Move down delta bytes, to the frame below. A link that says 0 (the walk
 * would stay where it is) or more than the address below the frame (it
 * would wrap around to memory above the stack) is no frame's: a torn or
 * misread stack. */
static __always_inline int lj_walk_down(struct lj_walk *w, __u64 delta)
{
	if (lj_unlikely(delta == 0 || delta > w->f)) {
		w->err = NUPP_ERR_BAD_BASE + 1;
		return 1;
	}
	w->f -= delta;
	return 0;
}

/* The frame below one called from C, pcall or a continuation: its link is
 * the distance down to it. */
static __always_inline int lj_walk_to_frame_below(struct lj_walk_mem *m)
{
	struct lj_walk *w = &m->w;

	if (lj_unlikely((w->link & LJ_FRAME_TYPEP) == LJ_FRAME_CONT)) {
		__u64 off = w->f - 16 - w->chunk_lo;

		/* frame_contpc(), from the window when it holds it. */
		if (w->chunk_lo && w->f - 16 >= w->chunk_lo && off <= LJ_CHUNK - 8)
			w->pc = lj_u64_at(m->chunk, (__u32)off, LJ_CHUNK);
		else if (LJ_READ(&w->pc, 8, w->f - 16)) {
			w->err = NUPP_ERR_READ + 1;
			return 1;
		}
	} else {
		w->pc = 0;	/* C, cpcall, pcall: not stored in the frame */
	}
	return lj_walk_down(w, w->link & ~(__u64)LJ_FRAME_TYPEP);	/* frame_delta() in bytes */
}

/* Emit the frame at w->f and move to the one below it. 0: go on, 1: stop. */
static __always_inline int lj_walk_step(struct lj_walk_mem *m, const struct lj_layout *lj)
{
	struct lj_walk *w = &m->w;

	if (lj_unlikely(w->f <= w->bot))
		return 1;
	if (lj_unlikely(w->depth >= w->max))	/* more frames than kept */
		return 1;
	if (lj_unlikely(lj_walk_slots(m))) {
		w->err = NUPP_ERR_READ + 1;
		return 1;
	}
	if (lj_unlikely((w->link & LJ_FRAME_TYPEP) == LJ_FRAME_VARG)) {
		/* Vararg pseudo-frame: the real frame of the same function lies
		 * below it and keeps this frame's pc (lj_debug_frame skips it). */
		return lj_walk_down(w, w->link & ~(__u64)LJ_FRAME_TYPEP);
	}
	/* frame_gc(): a dummy frame (func == L) is not shown. */
	if (lj_likely((w->fn & LJ_GCVMASK) != w->L) && lj_unlikely(lj_walk_emit(m, lj)))
		return 1;
	w->next_id = 0;
	w->fill_pc = 0;
	if ((w->link & LJ_FRAME_TYPE) == LJ_FRAME_LUA)
		return lj_walk_to_lua_caller(m);
	return lj_walk_to_frame_below(m);
}

#endif /* NUPP_LJ_WALK_H */
