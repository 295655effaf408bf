// SPDX-License-Identifier: MIT
/*
 * tracemap.c - compiled samples mapped through their trace's snapshots.
 *
 * See tracemap.h. LuaJIT facts used here (x86-64, GC64, LJ_FR2), from
 * lj_jit.h, lj_ir.h, lj_snap.c and lj_asm.c of LuaJIT 2.1 since 2021-03:
 *   - J->trace[n] (a GCRef array of J->sizetrace) is trace n's GCtrace;
 *   - T->mcode[0 .. szmcode) is its machine code; snapshot i's code starts
 *     at offset T->snap[i].mcofs, and the offsets grow with i
 *     (asm_snap_fixup_mcofs; lj_trace_unwind searches them the same way);
 *   - snapshot i's entries are T->snapmap[mapofs .. mapofs + nent): slot
 *     (bits 24..31), flags (SNAP_FRAME 0x10000, SNAP_CONT 0x20000) and an
 *     IR reference (bits 0..15). Slot s is the stack slot jit_base - 2 + s.
 *     With LJ_FR2 the 64-bit word after the entries is (PC << 8) | (the
 *     innermost frame's base slot - 2) (snapshot_framelinks);
 *   - a frame slot (SNAP_FRAME) and a continuation slot (SNAP_CONT) hold a
 *     KNUM constant: the frame link, or a continuation's PC, as the
 *     interpreter had it when the trace was recorded (snapshot_slots); the
 *     slot below a frame slot holds its function, a KGC constant
 *     (rec_call_specialize), or, for a closure made too often
 *     (PROTO_CLC_POLY), the closure value, whose prototype the trace checks
 *     against a constant;
 *   - IR constants lie at refs [T->nk, REF_BIAS) of T->ir (biased), 8 bytes
 *     each; a 64-bit one (KNUM, and KGC in GC64) keeps its value in the
 *     next 8 bytes;
 *   - a trace that links to another writes the frames of its last snapshot
 *     to the stack and stores its new BASE in jit_base before it jumps
 *     (asm_tail_link), as a return below the start frame stores the lower
 *     one (asm_retf).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "bcpath.h"
#include "luajit/x86_lengths.h"
#include "tracemap.h"

#define REF_BIAS	0x8000u
#define SNAP_FRAME	0x010000u
#define SNAP_CONT	0x020000u
#define HDR_MAX		256	/* the largest GCtrace or GCproto header read */
#define FN_HDR		64	/* bytes of a GCfunc read (as lj_walk.h) */
#define SLOTS		256	/* a snapshot slot is 8 bits */
#define TRACENO_MAX	65536	/* J->sizetrace is at most this */

/* What one snapshot says: the frames an exit there restores above the
 * trace's base frame, and what becomes of the base frame. */
struct tm_chain {
	int state;			/* 0 not resolved yet, 1 resolved, -1 not mappable */
	int n;
	struct nupp_frame *frames;	/* n, innermost first: pc | enum nupp_call */
	__u64 *closures;		/* n: each frame's GCfunc, 0 when no constant */
	__u64 base_closure;		/* the base frame's, when the trace stored it */
	__u64 base_pc;			/* the base frame's pc (after its instruction), 0 unknown */
	__u64 base_fn;			/* its function when the trace replaced it (a tail
					 * call), else 0: the one in memory */
	int span_state;			/* 0 not built yet, 1 built, -1 none */
	struct bcpath span;		/* the bytecodes from this snapshot to the next */
};

/* A trace as read. Its header fields are checked again at each poll. */
struct tm_trace {
	__u64 T, startpc, startpt, mcode, snap, snapmap, ir;
	__u32 szmcode, nsnap, nsnapmap, nk, nins, traceno;
	__u64 checked;			/* tracemap.poll when last checked */
	__u8 *snaps;			/* the SnapShot array, nsnap * sn_size bytes */
	struct tm_chain *chains;	/* by snapshot (both after the struct, in its block) */
	__u64 *protos;			/* prototypes its KGC constants name, read once */
	int nprotos, protos_read;
	__u8 *kbuf;			/* its IR constants, read at most once a poll */
	__u64 kbuf_poll;		/* tracemap.poll when read */
	struct tm_memo *memo;		/* what its constants lead to */
	int nmemo;
	struct tm_site *sites;		/* its calls, from every snapshot's frames */
	int nsites, sites_read;
	__u64 base_closure;		/* its base frame's GCfunc, when a snapshot holds it */
	struct tm_proto *code;		/* the bytecode its spans walk, read once (the
					 * trace holds those prototypes alive) */
	int ncode;
	size_t bytes;
};

/* What a constant of a trace leads to, read once: a function constant's
 * identity (by its ref), a Lua frame link's CALL operand A (by its ref |
 * MEMO_CALL_A). The trace holds both alive. */
#define MEMO_CALL_A	0x10000u
struct tm_memo {
	__u32 ref;
	__u64 v;
};

/* A Lua call inlined into a trace: the function the frame above the call
 * runs, by its return address (a trace runs one function per call site). */
struct tm_site {
	__u64 ret, fn;
};

struct tracemap {
	const struct lj_build *b;
	const struct lj_layout *lj;
	struct mem_reader mem;
	__u64 vm_lo, vm_hi;		/* the interpreter's code */
	int op_kgc, op_knum;		/* IR opcodes, from the build's irnames */
	int op_kint64, op_kptr, op_kkptr;	/* the other 64-bit constants */
	struct bcpath_ops bcops;	/* how the build's bytecodes walk */
	bool by_snapshot;		/* NUPP_SPANS=snapshot: a span's code all to
					 * its first snapshot (calibration) */
	/* Every VM numbers its own traces from 1 (a host's worker threads,
	 * each with its VM, compile the same loop as trace 1 each): a trace
	 * is known by its VM and its number. */
	struct tm_vm *vms;
	size_t nvms, ntraces, bytes;
	__u64 poll;			/* tracemap__poll() calls */
};

/* A prototype's bytecode as read (nbc 0: not a prototype when read). */
struct tm_proto {
	__u64 pt;
	__u32 *bc;
	__u32 nbc;
};

/* The traces of one VM, by number. */
struct tm_vm {
	__u64 g;
	struct tm_trace **by_no;
	size_t cap;
};

struct tracemap *tracemap__new(const struct lj_build *b, struct mem_reader mem, __u64 vm_lo,
			       __u64 vm_hi)
{
	const struct lj_layout *lj = &b->layout;
	struct tracemap *tm;

	/* A layout without the trace fields (0), or one this code cannot read. */
	if (!lj->tr_size || lj->tr_size > HDR_MAX || lj->pt_size > HDR_MAX || !lj->sn_size ||
	    lj->ir_size != 8 || !lj->J_trace)
		return NULL;
	tm = calloc(1, sizeof(*tm));
	if (!tm)
		return NULL;
	/* The constants a snapshot's slots name functions and frames with. */
	const struct lj_op_name ops[] = {
		{ "KGC", &tm->op_kgc }, { "KNUM", &tm->op_knum }, { "KINT64", &tm->op_kint64 },
		{ "KPTR", &tm->op_kptr }, { "KKPTR", &tm->op_kkptr },
	};
	if (lj_ops_by_name(b->irnames, b->nirnames, ops, sizeof(ops) / sizeof(ops[0]))) {
		free(tm);
		return NULL;
	}
	tm->b = b;
	tm->lj = lj;
	tm->mem = mem;
	tm->vm_lo = vm_lo;
	tm->vm_hi = vm_hi;
	bcpath_ops_init(&tm->bcops, b->bcnames, b->nbcnames);
	tm->by_snapshot = getenv("NUPP_SPANS") && !strcmp(getenv("NUPP_SPANS"), "snapshot");
	return tm;
}

static void trace_free(struct tm_trace *tr)
{
	if (!tr)
		return;
	for (__u32 i = 0; i < tr->nsnap; i++) {
		free(tr->chains[i].frames);
		free(tr->chains[i].closures);
		bcpath_free(&tr->chains[i].span);
	}
	free(tr->protos);
	free(tr->sites);
	for (int i = 0; i < tr->ncode; i++)
		free(tr->code[i].bc);
	free(tr->code);
	free(tr->kbuf);
	free(tr->memo);
	free(tr);
}

void tracemap__flush(struct tracemap *tm)
{
	if (!tm)
		return;
	for (size_t v = 0; v < tm->nvms; v++) {
		for (size_t i = 0; i < tm->vms[v].cap; i++)
			trace_free(tm->vms[v].by_no[i]);
		free(tm->vms[v].by_no);
	}
	free(tm->vms);
	tm->vms = NULL;
	tm->nvms = tm->ntraces = tm->bytes = 0;

}

void tracemap__free(struct tracemap *tm)
{
	tracemap__flush(tm);
	free(tm);
}

void tracemap__poll(struct tracemap *tm)
{
	if (!tm)
		return;
	tm->poll++;
	/* A trace's constants are read again for the next poll's stacks. */
	for (size_t v = 0; v < tm->nvms; v++)
		for (size_t i = 0; i < tm->vms[v].cap; i++) {
			struct tm_trace *tr = tm->vms[v].by_no[i];

			if (tr && tr->kbuf) {
				free(tr->kbuf);
				tr->kbuf = NULL;
			}
		}
}

size_t tracemap__traces(const struct tracemap *tm)
{
	return tm ? tm->ntraces : 0;
}

size_t tracemap__bytes(const struct tracemap *tm)
{
	size_t n = 0;

	if (!tm)
		return 0;
	for (size_t v = 0; v < tm->nvms; v++)
		n += sizeof(tm->vms[v]) + tm->vms[v].cap * sizeof(*tm->vms[v].by_no);
	return sizeof(*tm) + n + tm->bytes;
}

/* The trace table of VM g, made when new; NULL on ENOMEM. */
static struct tm_vm *vm_of(struct tracemap *tm, __u64 g)
{
	struct tm_vm *more;

	for (size_t v = 0; v < tm->nvms; v++)
		if (tm->vms[v].g == g)
			return &tm->vms[v];
	if (!(more = realloc(tm->vms, (tm->nvms + 1) * sizeof(*more))))
		return NULL;
	tm->vms = more;
	more[tm->nvms] = (struct tm_vm){ .g = g };
	return &more[tm->nvms++];
}

/* Room for trace n in vm's table; -ENOMEM. */
static int vm_reserve(struct tm_vm *vm, __u32 n)
{
	size_t cap = vm->cap ? vm->cap : 64;
	struct tm_trace **more;

	if (n < vm->cap)
		return 0;
	while (cap <= n)
		cap *= 2;
	if (!(more = realloc(vm->by_no, cap * sizeof(*more))))
		return -ENOMEM;
	memset(more + vm->cap, 0, (cap - vm->cap) * sizeof(*more));
	vm->by_no = more;
	vm->cap = cap;
	return 0;
}

/* ---------------------------------------------------------------------------
 * Reading
 */

static int rd(struct tracemap *tm, void *dst, size_t n, __u64 addr)
{
	return addr ? mem_read(&tm->mem, dst, n, addr) : -EFAULT;
}

static __u64 u64_at(const __u8 *p, __u32 off)
{
	__u64 v;

	memcpy(&v, p + off, 8);
	return v;
}

static __u32 u32_at(const __u8 *p, __u32 off)
{
	__u32 v;

	memcpy(&v, p + off, 4);
	return v;
}

static __u16 u16_at(const __u8 *p, __u32 off)
{
	__u16 v;

	memcpy(&v, p + off, 2);
	return v;
}

/* Trace n of the VM g as J->trace[n] holds it now, its header into hdr;
 * 0 when there is none. */
/* VM g's J->trace array and J->sizetrace; -1 when unreadable. */
static int trace_array(struct tracemap *tm, __u64 g, __u64 *arr, __u32 *size)
{
	const struct lj_layout *lj = tm->lj;
	__u64 J = g - lj->gg_g + lj->gg_j;
	__u32 lo = lj->J_trace < lj->J_sizetrace ? lj->J_trace : lj->J_sizetrace;
	__u8 jb[64];

	/* J->trace and J->sizetrace in one read (they are neighbours). */
	if (!lj->gg_j || lj->J_trace + 8 - lo > sizeof(jb) ||
	    lj->J_sizetrace + 4 - lo > sizeof(jb) || rd(tm, jb, sizeof(jb), J + lo))
		return -1;
	*size = u32_at(jb, lj->J_sizetrace - lo);
	*arr = u64_at(jb, lj->J_trace - lo);
	return *size > TRACENO_MAX ? -1 : 0;
}

static __u64 trace_ptr(struct tracemap *tm, __u64 g, __u32 n, __u8 *hdr)
{
	const struct lj_layout *lj = tm->lj;
	__u64 arr, T;
	__u32 size;

	if (!n || trace_array(tm, g, &arr, &size) || n >= size ||
	    rd(tm, &T, 8, arr + 8 * (__u64)n))
		return 0;
	T &= LJ_GCVMASK;
	if (!T || rd(tm, hdr, lj->tr_size, T) || hdr[lj->gc_gct] != LJ_GCT_TRACE ||
	    u16_at(hdr, lj->tr_traceno) != n)
		return 0;
	return T;
}

/* The header fields that make a trace what it is: a trace of that number
 * with others is another trace. */
static void trace_fields(const struct lj_layout *lj, const __u8 *hdr, __u64 T, struct tm_trace *tr)
{
	tr->T = T;
	tr->startpc = u64_at(hdr, lj->tr_startpc);
	tr->startpt = u64_at(hdr, lj->tr_startpt) & LJ_GCVMASK;
	tr->mcode = u64_at(hdr, lj->tr_mcode);
	tr->snap = u64_at(hdr, lj->tr_snap);
	tr->snapmap = u64_at(hdr, lj->tr_snapmap);
	tr->ir = u64_at(hdr, lj->tr_ir);
	tr->szmcode = u32_at(hdr, lj->tr_szmcode);
	tr->nsnap = u16_at(hdr, lj->tr_nsnap);
	tr->nsnapmap = u32_at(hdr, lj->tr_nsnapmap);
	tr->nk = u32_at(hdr, lj->tr_nk);
	tr->nins = u32_at(hdr, lj->tr_nins);
	tr->traceno = u16_at(hdr, lj->tr_traceno);
}

static bool trace_same(const struct tm_trace *a, const struct tm_trace *b)
{
	return a->T == b->T && a->startpc == b->startpc && a->mcode == b->mcode &&
	       a->snap == b->snap && a->snapmap == b->snapmap && a->ir == b->ir &&
	       a->szmcode == b->szmcode && a->nsnap == b->nsnap && a->nsnapmap == b->nsnapmap &&
	       a->nk == b->nk && a->nins == b->nins;
}

/* Trace n of VM g, read now or as kept when it is still the same trace;
 * NULL when it cannot be read (gone, never there). *err = -ENOMEM. */
static struct tm_trace *trace_get(struct tracemap *tm, __u64 g, __u32 n, int *err)
{
	const struct lj_layout *lj = tm->lj;
	struct tm_trace now = { 0 }, *tr;
	struct tm_vm *vm;
	__u8 hdr[HDR_MAX];
	__u32 prev_mcofs = 0;
	__u64 T;

	*err = 0;
	if (!(vm = vm_of(tm, g)) || vm_reserve(vm, n)) {
		*err = -ENOMEM;
		return NULL;
	}
	/* Checked since the last poll: the stacks symbolized at one poll were
	 * recorded within its interval, and a trace replaced meanwhile has
	 * its code elsewhere (the caller checks the address). */
	if ((tr = vm->by_no[n]) && tr->checked == tm->poll)
		return tr;
	T = trace_ptr(tm, g, n, hdr);
	if (!T)
		return NULL;
	trace_fields(lj, hdr, T, &now);
	if ((tr = vm->by_no[n]) && trace_same(tr, &now)) {
		tr->checked = tm->poll;
		return tr;
	}
	/* New, or its number now names another trace. */
	if (vm->by_no[n]) {
		tm->bytes -= vm->by_no[n]->bytes;
		tm->ntraces--;
		trace_free(vm->by_no[n]);
		vm->by_no[n] = NULL;
	}
	if (!now.nsnap || now.nk >= REF_BIAS || now.nins <= REF_BIAS)
		return NULL;
	/* The trace, then its chains, then its snapshots, in one block. */
	tr = calloc(1, sizeof(*tr) + (size_t)now.nsnap * (sizeof(*tr->chains) + lj->sn_size));
	if (!tr) {
		*err = -ENOMEM;
		return NULL;
	}
	memcpy(tr, &now, offsetof(struct tm_trace, snaps));
	tr->chains = (struct tm_chain *)(tr + 1);
	tr->snaps = (__u8 *)(tr->chains + now.nsnap);
	if (rd(tm, tr->snaps, (size_t)now.nsnap * lj->sn_size, now.snap)) {
		trace_free(tr);
		return NULL;
	}
	/* The offsets must grow, as the assembler leaves them. */
	for (__u32 i = 0; i < tr->nsnap; i++) {
		__u32 ofs = u16_at(tr->snaps + (size_t)i * lj->sn_size, lj->sn_mcofs);

		if (ofs < prev_mcofs || ofs >= tr->szmcode) {
			trace_free(tr);
			return NULL;
		}
		prev_mcofs = ofs;
	}
	tr->checked = tm->poll;
	tr->bytes = sizeof(*tr) + (size_t)tr->nsnap * (lj->sn_size + sizeof(*tr->chains));
	vm->by_no[n] = tr;
	tm->bytes += tr->bytes;
	tm->ntraces++;
	return tr;
}

/* The snapshot whose code holds offset ofs: the last one starting at or
 * before it (lj_trace_unwind's rightmost binary search). */
static __u32 snap_at(const struct tracemap *tm, const struct tm_trace *tr, __u32 ofs)
{
	__u32 lo = 0, hi = tr->nsnap;

	while (lo < hi) {
		__u32 mid = (lo + hi) / 2;

		if (ofs < u16_at(tr->snaps + (size_t)mid * tm->lj->sn_size, tm->lj->sn_mcofs))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo - 1;	/* snap[0].mcofs == 0 <= ofs */
}

/* IR constant ref of tr: its opcode and 64-bit value (the next 8 bytes,
 * where KNUM and, in GC64, KGC keep it). 0, or -1 when ref is not a
 * constant or cannot be read. */
static int ir_const(struct tracemap *tm, struct tm_trace *tr, __u32 ref, int *op, __u64 *v)
{
	const __u8 *ins;
	__u8 one[16];

	if (ref < tr->nk || ref + 1 >= REF_BIAS)
		return -1;
	/* All of the trace's constants in one read (this poll's), rather than
	 * a read each; one at a time if that read fails. */
	if (!tr->kbuf && tr->kbuf_poll != tm->poll + 1) {
		size_t n = 8 * (size_t)(REF_BIAS - tr->nk);

		tr->kbuf_poll = tm->poll + 1;	/* tried at this poll */
		if ((tr->kbuf = malloc(n)) && rd(tm, tr->kbuf, n, tr->ir + 8 * (__u64)tr->nk)) {
			free(tr->kbuf);
			tr->kbuf = NULL;
		}
	}
	if (tr->kbuf) {
		ins = tr->kbuf + 8 * (size_t)(ref - tr->nk);
	} else {
		if (rd(tm, one, sizeof(one), tr->ir + 8 * (__u64)ref))
			return -1;
		ins = one;
	}
	*op = ins[tm->lj->ir_o];
	*v = u64_at(ins, 8);
	return 0;
}

/* The memo of ref in tr (struct tm_memo), or NULL. */
static const struct tm_memo *memo_find(const struct tm_trace *tr, __u32 ref)
{
	for (int i = 0; i < tr->nmemo; i++)
		if (tr->memo[i].ref == ref)
			return &tr->memo[i];
	return NULL;
}

static int memo_put(struct tracemap *tm, struct tm_trace *tr, __u32 ref, __u64 v)
{
	struct tm_memo *more = realloc(tr->memo, (tr->nmemo + 1) * sizeof(*more));

	if (!more)
		return -ENOMEM;
	tr->memo = more;
	tr->memo[tr->nmemo++] = (struct tm_memo){ ref, v };
	tr->bytes += sizeof(*more);
	tm->bytes += sizeof(*more);
	return 0;
}

/* What the GCfunc at fn runs (struct nupp_frame.fn), 0 when unreadable. */
static __u64 fn_identity(struct tracemap *tm, __u64 fn)
{
	const struct lj_layout *lj = tm->lj;
	__u8 hdr[FN_HDR];
	__u64 v;
	__u8 ffid;

	if (lj->fn_ffid >= FN_HDR || lj->fn_pc + 8 > FN_HDR || lj->fn_f + 8 > FN_HDR ||
	    rd(tm, hdr, FN_HDR, fn & LJ_GCVMASK) || hdr[lj->gc_gct] != LJ_GCT_FUNC)
		return 0;
	ffid = hdr[lj->fn_ffid];
	if (ffid > 1)
		return NUPP_FN(NUPP_FN_FF, ffid);
	v = u64_at(hdr, ffid ? lj->fn_f : lj->fn_pc);
	if (!v)
		return 0;
	return ffid ? NUPP_FN(NUPP_FN_C, v) : NUPP_FN(NUPP_FN_LUA, v - lj->pt_size);
}

/* Does the bytecode of prototype pt hold the instruction before pc? */
static bool proto_holds(struct tracemap *tm, __u64 pt, __u64 pc)
{
	const struct lj_layout *lj = tm->lj;
	__u8 hdr[HDR_MAX];
	__u64 bc = pt + lj->pt_size;

	if (rd(tm, hdr, lj->pt_size, pt) || hdr[lj->gc_gct] != LJ_GCT_PROTO)
		return false;
	return pc >= bc + 4 && pc <= bc + 4 * (__u64)u32_at(hdr, lj->pt_sizebc);
}

/* The prototypes tr's constants name (KGC prototypes, and those of KGC Lua
 * functions), read once: where a frame's function is no constant. */
static int trace_protos(struct tracemap *tm, struct tm_trace *tr)
{
	__u32 n = REF_BIAS - tr->nk;
	__u8 *ins;

	if (tr->protos_read)
		return 0;
	tr->protos_read = 1;
	if (!(ins = malloc((size_t)n * 8)))
		return -ENOMEM;
	if (!rd(tm, ins, (size_t)n * 8, tr->ir + 8 * (__u64)tr->nk)) {
		for (__u32 i = 0; i + 1 < n; i++) {
			__u64 obj = u64_at(ins, 8 * (i + 1)) & LJ_GCVMASK, id;
			int op = ins[8 * i + tm->lj->ir_o];
			__u8 gct;
			__u64 *more;

			/* A 64-bit constant (ir_isk64, GC64) keeps its value in
			 * the next slot, which is no instruction. */
			if (op != tm->op_kgc) {
				i += op == tm->op_knum || op == tm->op_kint64 || op == tm->op_kptr ||
				     op == tm->op_kkptr;
				continue;
			}
			i++;
			if (rd(tm, &gct, 1, obj + tm->lj->gc_gct))
				continue;
			if (gct == LJ_GCT_FUNC && (id = fn_identity(tm, obj)) &&
			    NUPP_FN_KIND(id) == NUPP_FN_LUA)
				obj = NUPP_FN_VALUE(id);
			else if (gct != LJ_GCT_PROTO)
				continue;
			if (!(more = realloc(tr->protos, (tr->nprotos + 1) * sizeof(*more)))) {
				free(ins);
				return -ENOMEM;
			}
			tr->protos = more;
			tr->protos[tr->nprotos++] = obj;
			tr->bytes += sizeof(*more);
			tm->bytes += sizeof(*more);
		}
	}
	free(ins);
	return 0;
}

/* The function of a frame whose func slot holds no constant (a closure
 * the trace checks by its prototype): the prototype holding its pc. */
static __u64 fn_by_pc(struct tracemap *tm, struct tm_trace *tr, __u64 pc, int *err)
{
	if (!pc || (*err = trace_protos(tm, tr)))
		return 0;
	for (int i = 0; i < tr->nprotos; i++)
		if (proto_holds(tm, tr->protos[i], pc))
			return NUPP_FN(NUPP_FN_LUA, tr->protos[i]);
	return 0;
}

/* A snapshot's stack slots: which it sets, to which IR ref, with which flags. */
struct slots {
	__u32 ref[SLOTS];
	__u32 flags[SLOTS];
	__u8 set[SLOTS];
};

/* The 64-bit constant in slot s, flagged as a link or continuation slot. */
static int slot_link(struct tracemap *tm, struct tm_trace *tr, const struct slots *sl,
		     int s, __u64 *v)
{
	int op;

	if (s < 0 || s >= SLOTS || !sl->set[s] || !(sl->flags[s] & (SNAP_FRAME | SNAP_CONT)) ||
	    ir_const(tm, tr, sl->ref[s], &op, v) || op != tm->op_knum)
		return -1;
	return 0;
}

/* What the func slot s holds: a constant function's identity, else the
 * prototype holding pc; 0 when neither tells. */
static __u64 slot_fn(struct tracemap *tm, struct tm_trace *tr, const struct slots *sl, int s,
		     __u64 pc, int *err)
{
	const struct tm_memo *m;
	__u64 v;
	int op;

	if (s < 0 || s >= SLOTS || !sl->set[s])
		return 0;
	if ((m = memo_find(tr, sl->ref[s])))
		return m->v;
	if (!ir_const(tm, tr, sl->ref[s], &op, &v) && op == tm->op_kgc) {
		v = fn_identity(tm, v);
		if (v && (*err = memo_put(tm, tr, sl->ref[s], v)))
			return 0;
		return v;
	}
	return fn_by_pc(tm, tr, pc, err);
}

/* The GCfunc a func slot s holds as a KGC constant, else 0. */
static __u64 slot_closure(struct tracemap *tm, struct tm_trace *tr, const struct slots *sl, int s)
{
	__u64 v;
	int op;

	if (s < 0 || s >= SLOTS || !sl->set[s] || ir_const(tm, tr, sl->ref[s], &op, &v) ||
	    op != tm->op_kgc)
		return 0;
	return v & LJ_GCVMASK;
}

/* The frame slot below f by a delta link (frame_prevd), 0 when the delta
 * is none or reaches past the snapshot's slots. */
static int slot_below(int f, __u64 link)
{
	__u64 d = (link & ~(__u64)LJ_FRAME_TYPEP) / 8;

	return d && d < (__u64)f ? f - (int)d : 0;
}

static enum nupp_call call_kind(__u64 link)
{
	return (link & LJ_FRAME_TYPE) == LJ_FRAME_LUA ? NUPP_CALL_LUA :
	       (link & LJ_FRAME_TYPEP) == LJ_FRAME_CONT ? NUPP_CALL_CONT : NUPP_CALL_OTHER;
}

/* Rebuild what snapshot i of tr restores (struct tm_chain): walk its frame
 * links down from the innermost frame to the base frame, as lj_walk.h walks
 * them in memory. 0 (ch->state says whether it maps) or -ENOMEM. */
static int chain_resolve(struct tracemap *tm, struct tm_trace *tr, __u32 i, struct tm_chain *ch)
{
	const struct lj_layout *lj = tm->lj;
	const __u8 *sn = tr->snaps + (size_t)i * lj->sn_size;
	__u32 mapofs = u32_at(sn, lj->sn_mapofs), nent = sn[lj->sn_nent];
	struct nupp_frame frames[NUPP_MAX_DEPTH];
	__u64 closures[NUPP_MAX_DEPTH];
	__u32 map[SLOTS + 2];
	struct slots sl;
	__u64 pcbase, pc, link;
	int f, n = 0, err = 0;

	ch->state = -1;
	if (mapofs + nent + 2 > tr->nsnapmap ||
	    rd(tm, map, (nent + 2) * sizeof(__u32), tr->snapmap + 4 * (__u64)mapofs))
		return 0;
	memset(sl.set, 0, sizeof(sl.set));
	for (__u32 e = 0; e < nent; e++) {
		int s = map[e] >> 24;

		sl.set[s] = 1;
		sl.ref[s] = map[e] & 0xffff;
		sl.flags[s] = map[e] & 0xff0000;
	}
	memcpy(&pcbase, &map[nent], 8);
	pc = (pcbase >> 8) + 4;		/* at the instruction: as after it */
	for (f = (int)(pcbase & 0xff) + 1; f > 1;) {
		__u64 fn;

		if (slot_link(tm, tr, &sl, f, &link))
			return 0;
		if ((link & LJ_FRAME_TYPEP) == LJ_FRAME_VARG) {
			/* A vararg pseudo-frame: its function's frame lies below. */
			if (!(f = slot_below(f, link)))
				return 0;
			continue;
		}
		fn = slot_fn(tm, tr, &sl, f - 1, pc, &err);
		if (err)
			return err;
		if (!fn || n == NUPP_MAX_DEPTH)
			return 0;
		closures[n] = slot_closure(tm, tr, &sl, f - 1);
		frames[n++] = (struct nupp_frame){ fn, (pc & ~(__u64)NUPP_CALL_MASK) | call_kind(link) };
		if ((link & LJ_FRAME_TYPE) == LJ_FRAME_LUA) {
			/* The CALL before the return address: its base register. */
			const struct tm_memo *m = memo_find(tr, MEMO_CALL_A | sl.ref[f]);
			__u32 ins;

			if (!m) {
				if (rd(tm, &ins, 4, link - 4))
					return 0;
				if ((err = memo_put(tm, tr, MEMO_CALL_A | sl.ref[f], (ins >> 8) & 0xff)))
					return err;
				m = &tr->memo[tr->nmemo - 1];
			}
			pc = link;
			f -= 2 + (int)m->v;
		} else {
			if ((link & LJ_FRAME_TYPEP) != LJ_FRAME_CONT)
				pc = 0;		/* C, pcall: not stored in the frame */
			else if (slot_link(tm, tr, &sl, f - 2, &pc))
				return 0;
			if (!(f = slot_below(f, link)))
				return 0;
		}
	}
	if (f != 1)
		return 0;
	ch->base_pc = pc;
	/* Slot 0 is in the snapshot only when the trace changed the base
	 * frame's function (a tail call). */
	ch->base_fn = slot_fn(tm, tr, &sl, 0, pc, &err);
	if (err)
		return err;
	ch->base_closure = slot_closure(tm, tr, &sl, 0);
	if (n && (!(ch->frames = malloc(n * sizeof(*frames))) ||
		  !(ch->closures = malloc(n * sizeof(*closures)))))
		return -ENOMEM;
	memcpy(ch->frames, frames, n * sizeof(*frames));
	memcpy(ch->closures, closures, n * sizeof(*closures));
	ch->n = n;
	ch->state = 1;
	tr->bytes += n * (sizeof(*frames) + sizeof(*closures));
	tm->bytes += n * (sizeof(*frames) + sizeof(*closures));
	return 0;
}

/* Are ch's frames in memory already? A trace that links to another writes
 * the frames it inlined to the stack and moves jit_base to the innermost
 * before it jumps (asm_tail_link): a sample in those last instructions
 * walks them from memory. They are then the chain's functions, and the
 * base frame the chain returns to lies below them, not at in[0] (whose
 * bytecode does not hold the chain's base pc; a recursion whose inlined
 * frames repeat the walked ones has its base frame at in[0]). A trace
 * whose base frame is not the one it started in (it returned below it,
 * RETF, or tail-called: the snapshot holds slot 0) wrote that function
 * too: the frame below the chain's is it. */
static bool chain_in_memory(struct tracemap *tm, const struct tm_chain *ch,
			    const struct nupp_frame *in, int depth)
{
	int n = ch->n;

	if (!n || n >= depth || !ch->base_pc || (ch->base_fn && in[n].fn != ch->base_fn))
		return false;
	for (int k = 0; k < n; k++)
		if (in[k].fn != ch->frames[k].fn)
			return false;
	return NUPP_FN_KIND(in[n].fn) == NUPP_FN_LUA &&
	       proto_holds(tm, NUPP_FN_VALUE(in[n].fn), ch->base_pc) &&
	       !(NUPP_FN_KIND(in[0].fn) == NUPP_FN_LUA &&
		 proto_holds(tm, NUPP_FN_VALUE(in[0].fn), ch->base_pc));
}

/* ---------------------------------------------------------------------------
 * Spans: the code between two snapshots, placed on the bytecodes it ran
 */

#define BC_MAX		(1u << 20)	/* instructions of a prototype read */

/* What a span's path reads through. */
struct span_read {
	struct tracemap *tm;
	struct tm_trace *tr;
};

/* Prototype pt's bytecode, read once for tr; NULL when it is no prototype
 * or unreadable (remembered too), or on ENOMEM. */
static const struct tm_proto *proto_code(struct tracemap *tm, struct tm_trace *tr, __u64 pt)
{
	const struct lj_layout *lj = tm->lj;
	struct tm_proto *p, *more;
	__u8 hdr[HDR_MAX];

	for (int i = 0; i < tr->ncode; i++)
		if (tr->code[i].pt == pt)
			return tr->code[i].nbc ? &tr->code[i] : NULL;
	if (!(more = realloc(tr->code, (tr->ncode + 1) * sizeof(*more))))
		return NULL;
	tr->code = more;
	p = &tr->code[tr->ncode++];
	*p = (struct tm_proto){ pt, NULL, 0 };
	if (rd(tm, hdr, lj->pt_size, pt) || hdr[lj->gc_gct] != LJ_GCT_PROTO)
		return NULL;
	p->nbc = u32_at(hdr, lj->pt_sizebc);
	if (!p->nbc || p->nbc > BC_MAX || !(p->bc = malloc(4 * (size_t)p->nbc)) ||
	    rd(tm, p->bc, 4 * (size_t)p->nbc, pt + lj->pt_size)) {
		free(p->bc);
		p->bc = NULL;
		p->nbc = 0;
		return NULL;
	}
	tr->bytes += sizeof(*p) + 4 * (size_t)p->nbc;
	tm->bytes += sizeof(*p) + 4 * (size_t)p->nbc;
	return p;
}

/* Does prototype pt's bytecode, as tr read it, hold the instruction before pc? */
static bool code_holds(struct tracemap *tm, struct tm_trace *tr, __u64 pt, __u64 pc)
{
	const struct tm_proto *p = proto_code(tm, tr, pt);
	__u64 bc = pt + tm->lj->pt_size;

	return p && pc >= bc + 4 && pc <= bc + 4 * (__u64)p->nbc;
}

/* bcpath's code reader: a Lua function's bytecode, or (fn 0: the trace's
 * base frame) that of the trace's start prototype or of a prototype its
 * constants name, whichever holds pc. */
static int span_code(void *ctx, __u64 fn, __u64 pc, struct bcpath_code *code)
{
	struct span_read *sr = ctx;
	const struct tm_proto *p;
	__u64 pt;
	int err = 0;

	if (fn)
		pt = NUPP_FN_KIND(fn) == NUPP_FN_LUA ? NUPP_FN_VALUE(fn) : 0;
	else if (sr->tr->startpt && code_holds(sr->tm, sr->tr, sr->tr->startpt, pc))
		pt = sr->tr->startpt;
	else
		pt = NUPP_FN_VALUE(fn_by_pc(sr->tm, sr->tr, pc, &err));
	if (!pt || err || !(p = proto_code(sr->tm, sr->tr, pt)))
		return -1;
	*code = (struct bcpath_code){ p->bc, p->nbc, pt + sr->tm->lj->pt_size };
	return 0;
}

static int chain_levels(const struct tm_chain *ch, struct bcpath_level *lv);

/* tr's call sites (struct tm_site), from the frames of all its snapshots,
 * and its base frame's closure, read once. 0 or -ENOMEM. */
static int trace_sites(struct tracemap *tm, struct tm_trace *tr)
{
	struct bcpath_level lv[NUPP_MAX_DEPTH + 1];
	int err;

	if (tr->sites_read)
		return 0;
	tr->sites_read = 1;
	for (__u32 i = 0; i < tr->nsnap; i++) {
		struct tm_chain *ch = &tr->chains[i];
		int n;

		if (!ch->state && (err = chain_resolve(tm, tr, i, ch)))
			return err;
		if (ch->state < 0)
			continue;
		if (!tr->base_closure)
			tr->base_closure = ch->base_closure;
		n = chain_levels(ch, lv);
		for (int k = 0; k + 1 < n; k++) {
			__u64 ret = lv[k].pc & ~(__u64)NUPP_CALL_MASK;
			struct tm_site *more;
			int s;

			if ((lv[k + 1].pc & NUPP_CALL_MASK) != NUPP_CALL_LUA || !ret)
				continue;
			for (s = 0; s < tr->nsites && tr->sites[s].ret != ret; s++)
				;
			if (s < tr->nsites)
				continue;
			if (!(more = realloc(tr->sites, (tr->nsites + 1) * sizeof(*more))))
				return -ENOMEM;
			tr->sites = more;
			tr->sites[tr->nsites++] = (struct tm_site){ ret, lv[k + 1].fn };
			tr->bytes += sizeof(*more);
			tm->bytes += sizeof(*more);
		}
	}
	return 0;
}

/* The Lua function upvalue uv of the closure fn holds, when it is one of
 * the functions tr holds as constants (a constified upvalue: rec_upvalue).
 * GCfuncL's upvalue pointers follow its pc (lj_obj.h: GCfuncHeader ends in
 * MRef pc, then GCRef uvptr[]); GCupval (GC64) keeps closed/immutable
 * after its header, the value at 16 and MRef v at 32, v pointing at the
 * value when closed. Each is checked as read: the upvalue's type, a closed
 * one's v pointing into itself, the value's function tag, and the function
 * among the trace's constants. 0 or -1. */
#define UV_TV		16
#define UV_V		32
#define TV_FUNC_TAG	0x1fff7ULL	/* GC64 itype of LJ_TFUNC (~8u), bits 47..63 */
static int upvalue_fn(struct tracemap *tm, struct tm_trace *tr, __u64 fn, int uv,
		      struct bcpath_level *out)
{
	const struct lj_layout *lj = tm->lj;
	__u8 hdr[FN_HDR], up[UV_V + 8];
	__u64 uvo, tv, id;
	int err = 0;

	if (!fn || uv < 0 || lj->fn_ffid + 1 >= FN_HDR || rd(tm, hdr, FN_HDR, fn) ||
	    hdr[lj->gc_gct] != LJ_GCT_FUNC || hdr[lj->fn_ffid] != 0 || uv >= hdr[lj->fn_ffid + 1] ||
	    rd(tm, &uvo, 8, fn + lj->fn_pc + 8 + 8 * (__u64)uv))
		return -1;
	uvo &= LJ_GCVMASK;
	if (rd(tm, up, sizeof(up), uvo) || up[lj->gc_gct] != LJ_GCT_UPVAL)
		return -1;
	if (up[lj->gc_gct + 1] && u64_at(up, UV_V) != uvo + UV_TV)
		return -1;
	if (rd(tm, &tv, 8, u64_at(up, UV_V)) || tv >> 47 != TV_FUNC_TAG)
		return -1;
	id = fn_identity(tm, tv & LJ_GCVMASK);
	if (NUPP_FN_KIND(id) != NUPP_FN_LUA || (err = trace_protos(tm, tr)))
		return -1;
	for (int i = 0; i < tr->nprotos; i++)
		if (tr->protos[i] == NUPP_FN_VALUE(id)) {
			*out = (struct bcpath_level){ id, 0, tv & LJ_GCVMASK };
			return 0;
		}
	return -1;
}

/* bcpath's callee reader: the function another snapshot of the trace
 * shows called from the same place, else the one the caller's upvalue
 * holds (the caller's closure as a constant of the trace: its func slot's,
 * or for the base frame any snapshot's). */
static int span_callee(void *ctx, const struct bcpath_level *caller, __u64 ret, int uv,
		       struct bcpath_level *callee)
{
	struct span_read *sr = ctx;
	struct tm_trace *tr = sr->tr;
	__u64 closure = caller->closure;

	/* Read once a trace's path first meets a call it cannot follow
	 * otherwise: most never do. */
	if (trace_sites(sr->tm, tr))
		return -1;
	for (int s = 0; s < tr->nsites; s++)
		if (tr->sites[s].ret == ret) {
			*callee = (struct bcpath_level){ tr->sites[s].fn, 0, 0 };
			return 0;
		}
	if (!closure && tr->base_closure) {
		__u64 id = fn_identity(sr->tm, tr->base_closure);

		if (caller->fn ? caller->fn == id :
		    NUPP_FN_KIND(id) == NUPP_FN_LUA &&
		    proto_holds(sr->tm, NUPP_FN_VALUE(id), caller->pc & ~(__u64)NUPP_CALL_MASK))
			closure = tr->base_closure;
	}
	return upvalue_fn(sr->tm, tr, closure, uv, callee);
}

/* A chain's frames as bcpath levels, the base frame first. */
static int chain_levels(const struct tm_chain *ch, struct bcpath_level *lv)
{
	int n = 0;

	lv[n++] = (struct bcpath_level){ ch->base_fn, ch->base_pc, ch->base_closure };
	for (int k = ch->n - 1; k >= 0; k--)
		lv[n++] = (struct bcpath_level){ ch->frames[k].fn, ch->frames[k].pc, ch->closures[k] };
	return n;
}

/* The path of snapshot i's span to snapshot i + 1 (ch->span), built once;
 * 0 (ch->span_state says whether there is one) or -ENOMEM. */
static int span_resolve(struct tracemap *tm, struct tm_trace *tr, __u32 i, struct tm_chain *ch)
{
	struct bcpath_level a[NUPP_MAX_DEPTH + 1], b[NUPP_MAX_DEPTH + 1];
	struct tm_chain *next = &tr->chains[i + 1];
	struct span_read sr = { .tm = tm, .tr = tr };
	struct bcpath_reader reader = { span_code, span_callee, &sr };
	int err;

	ch->span_state = -1;
	if (!next->state && (err = chain_resolve(tm, tr, i + 1, next)))
		return err;
	if (next->state < 0)
		return 0;
	err = bcpath_build(&ch->span, &tm->bcops, a, chain_levels(ch, a), b,
			   chain_levels(next, b), &reader);
	if (err == -ENOMEM)
		return err;
	if (!err) {
		size_t bytes = ch->span.nsteps * sizeof(*ch->span.steps) +
			       ch->span.nlevels * sizeof(*ch->span.levels);

		ch->span_state = 1;
		tr->bytes += bytes;
		tm->bytes += bytes;
	}
	return 0;
}

/* The frames of a span's step at offset ofs of tr's code, snapshot i's
 * span, into out (innermost first) as tracemap__expand lays out a chain's:
 * the frames above the base, then the base with its pc in out[k]. The
 * number of frames above the base, or -1 when the span has no path. */
static int span_frames(struct tracemap *tm, struct tm_trace *tr, __u32 i, __u32 ofs,
		       struct nupp_frame *out, __u64 *base_fn, __u64 *base_pc)
{
	const struct tm_chain *ch = &tr->chains[i];
	__u32 lo = u16_at(tr->snaps + (size_t)i * tm->lj->sn_size, tm->lj->sn_mcofs);
	__u32 hi = u16_at(tr->snaps + (size_t)(i + 1) * tm->lj->sn_size, tm->lj->sn_mcofs);
	const struct bcpath_step *st;
	const struct bcpath_level *lv;
	int top;

	if (ch->span_state != 1 || hi <= lo || !(st = bcpath_at(&ch->span, ofs - lo, hi - lo)))
		return -1;
	lv = ch->span.levels + st->lv;
	top = st->nlv - 1;
	/* The step's frame at its pc; those below it at theirs. */
	for (int k = top; k >= 1; k--)
		out[top - k] = (struct nupp_frame){
			lv[k].fn, (k == top ? st->pc : lv[k].pc & ~(__u64)NUPP_CALL_MASK) |
				  (lv[k].pc & NUPP_CALL_MASK) };
	*base_fn = lv[0].fn;
	*base_pc = top ? lv[0].pc : st->pc | (lv[0].pc & NUPP_CALL_MASK);
	return top;
}

/* The trace whose head ip lies in, before the head stores the trace's number
 * in g->vmstate, or NULL: a sample there still reads the number of the trace
 * that jumped to it. A root trace's head adjusts the stack and then stores
 * its number (asm_head_root: emit_spsub, emit_setvmstate, `mov dword [r14 +
 * DISPATCH_GL(vmstate)], n`); a side trace's head does the same, then moves
 * the parent's registers and spill slots into its own (asm_head_side), and
 * its parent's exit branch jumps to its first instruction, so the store is
 * at most a few instructions on from ip. fib's side traces, entered on every
 * return of the recursion, held 40 % of its compiled samples there. The
 * instructions from ip on are decoded (capstone) through conditional
 * branches (a side trace's stack check falls through) up to the first jmp,
 * call or return; the trace the store names must hold ip. */
#define HEAD_BYTES	64
#define HEAD_INSNS	12
static struct tm_trace *trace_entered_at(struct tracemap *tm, __u64 g, __u64 ip, int *err)
{
	__u8 code[HEAD_BYTES], lens[HEAD_INSNS];
	size_t len = sizeof(code), at = 0;
	struct tm_trace *tr = NULL;
	int n;

	/* The code may end near the end of its mapping. */
	while (len >= 16 && rd(tm, code, len, ip))
		len /= 2;
	if (len < 16 || (n = x86_straight_lengths(code, len, ip, lens, HEAD_INSNS)) < 0)
		return NULL;
	for (int i = 0; i < n; at += lens[i++]) {
		const __u8 *c = code + at;
		__s32 disp;
		__u32 no;

		if (lens[i] != 11 || c[0] != 0x41 || c[1] != 0xc7 || c[2] != 0x86)
			continue;
		memcpy(&disp, c + 3, 4);
		memcpy(&no, c + 7, 4);
		if (disp != (__s64)tm->lj->disp2g + tm->lj->g_vmstate)
			continue;
		if (no && no < TRACENO_MAX)
			tr = trace_get(tm, g, no, err);
		return tr && ip >= tr->mcode && ip - tr->mcode < tr->szmcode ? tr : NULL;
	}
	return NULL;
}

int tracemap__expand(struct tracemap *tm, __u64 g, const struct nupp_frame *in, int depth,
		     struct nupp_frame *out, int max, int *n)
{
	struct tm_trace *tr;
	struct tm_chain *ch;
	__u64 ip, base_fn, base_pc;
	__u32 i;
	int err, k;

	*n = depth < max ? depth : max;
	memcpy(out, in, *n * sizeof(*in));
	if (!depth || !NUPP_PC_IS_TRACE(in[0].pc))
		return TRACEMAP_NONE;
	out[0].pc = in[0].pc & NUPP_CALL_MASK;	/* unmapped: as if no position */
	if (!tm)
		return TRACEMAP_UNMAPPED;
	ip = tm->vm_lo + (__s64)NUPP_PC_TRACEOFF(in[0].pc);
	if (ip - tm->vm_lo < tm->vm_hi - tm->vm_lo)
		return TRACEMAP_IN_VM;
	tr = trace_get(tm, g, NUPP_PC_TRACENO(in[0].pc), &err);
	if (!tr)
		return err ? err : TRACEMAP_GONE;
	/* In another trace's first instruction (entered through a link), in
	 * code the trace called and no return into it was found, or in exit
	 * stubs. */
	if ((ip < tr->mcode || ip >= tr->mcode + tr->szmcode) &&
	    !(tr = trace_entered_at(tm, g, ip, &err)))
		return err ? err : TRACEMAP_UNMAPPED;
	i = snap_at(tm, tr, (__u32)(ip - tr->mcode));
	ch = &tr->chains[i];
	if (!ch->state && (err = chain_resolve(tm, tr, i, ch)))
		return err;
	if (ch->state < 0 || ch->n + depth > max)
		return TRACEMAP_UNMAPPED;
	memcpy(out, ch->frames, ch->n * sizeof(*out));
	if (chain_in_memory(tm, ch, in, depth)) {
		/* The walk's frames (out holds them past the chain's), with
		 * the pcs the snapshot gives them. */
		out[ch->n].pc = (ch->base_pc & ~(__u64)NUPP_CALL_MASK) | (in[ch->n].pc & NUPP_CALL_MASK);
		return TRACEMAP_MAPPED;
	}
	base_fn = ch->base_fn;
	base_pc = ch->base_pc;
	k = ch->n;
	/* Between this snapshot and the next: the bytecode that ran there. */
	if (i + 1 < tr->nsnap && !tm->by_snapshot) {
		if (!ch->span_state && (err = span_resolve(tm, tr, i, ch)))
			return err;
		if (ch->span_state > 0) {
			int top = span_frames(tm, tr, i, (__u32)(ip - tr->mcode), out, &base_fn,
					      &base_pc);

			if (top >= 0 && top + depth <= max)
				k = top;
			else
				memcpy(out, ch->frames, ch->n * sizeof(*out));
		}
	}
	memcpy(out + k, in, depth * sizeof(*in));
	out[k].fn = base_fn ? base_fn : in[0].fn;
	out[k].pc = (base_pc & ~(__u64)NUPP_CALL_MASK) | (in[0].pc & NUPP_CALL_MASK);
	*n = k + depth;
	return TRACEMAP_MAPPED;
}
