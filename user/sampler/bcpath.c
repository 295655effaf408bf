// SPDX-License-Identifier: MIT
/*
 * bcpath.c - the bytecodes a stretch of a trace's machine code ran.
 *
 * See bcpath.h. Bytecode facts (lj_bc.h of LuaJIT 2.1): an instruction is
 * 32 bits, its opcode in bits 0..7 and D in bits 16..31; a jump's target is
 * the next instruction plus D - 0x8000 (BCBIAS_J). A comparison or test
 * (IS*) is followed by the JMP it makes conditional. FORI jumps past its
 * loop when the loop does not run; FORL and ITERL jump back to the loop's
 * body; their compiled forms JFORL and JITERL hold a trace number in D, and
 * the body then starts after the FORI that jumps past the JFORL, or after
 * the JMP (or ISNEXT) that jumps to the ITERC or ITERN before the JITERL.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "bcpath.h"

#define BCBIAS_J	0x8000
#define WALK_MAX	4096	/* instructions one frame's walk may visit */
#define CALL_MASK	3ULL	/* NUPP_CALL_MASK: the low bits of a frame pc */

#define CALL_DEPTH	4	/* callees followed into, one within another */
#define STEPS_MAX	65536	/* steps of one path, callees and all */

static const char *const free_ops[] = {
	"MOV", "KSTR", "KCDATA", "KSHORT", "KNUM", "KPRI", "KNIL",
	"LOOP", "ILOOP", "JLOOP", "FUNCF", "IFUNCF", "JFUNCF", "FUNCV", "IFUNCV", "JFUNCV",
	"FUNCC", "FUNCCW",
};

void bcpath_ops_init(struct bcpath_ops *ops, const char *const *names, int n)
{
	memset(ops->kind, BCK_WORK, sizeof(ops->kind));
	ops->uget = -1;
	for (int op = 0; op < n && op < 256; op++) {
		const char *s = names[op];
		__u8 *k = &ops->kind[op];

		if (!s)
			continue;
		if (!strcmp(s, "UGET"))
			ops->uget = op;
		if (!strcmp(s, "JMP") || !strcmp(s, "ISNEXT") || !strcmp(s, "UCLO"))
			*k = BCK_JMP;
		else if (!strcmp(s, "FORL") || !strcmp(s, "IFORL") || !strcmp(s, "ITERL") ||
			 !strcmp(s, "IITERL"))
			*k = BCK_BACK;
		else if (!strcmp(s, "JFORL") || !strcmp(s, "JITERL"))
			*k = BCK_JBACK;
		else if (!strcmp(s, "FORI") || !strcmp(s, "JFORI"))
			*k = BCK_FORI;
		else if (!strcmp(s, "CALL") || !strcmp(s, "CALLM"))
			*k = BCK_CALL;
		else if (!strncmp(s, "RET", 3))
			*k = BCK_RET;
		else if (!strncmp(s, "IS", 2) && strcmp(s, "ISTYPE") && strcmp(s, "ISNUM"))
			*k = BCK_TEST;
		else
			for (size_t i = 0; i < sizeof(free_ops) / sizeof(free_ops[0]); i++)
				if (!strcmp(s, free_ops[i]))
					*k = BCK_FREE;
	}
}

struct builder {
	struct bcpath *p;
	const struct bcpath_ops *ops;
	const struct bcpath_reader *rd;
	int cap;
};

/* Room for n more levels; their index, or -ENOMEM. */
static int levels_add(struct bcpath *p, int n)
{
	if (p->nlevels + n > p->caplevels) {
		int cap = 2 * (p->nlevels + n);
		struct bcpath_level *more = realloc(p->levels, cap * sizeof(*more));

		if (!more)
			return -ENOMEM;
		p->levels = more;
		p->caplevels = cap;
	}
	p->nlevels += n;
	return p->nlevels - n;
}

static int push(struct builder *bd, __u64 pc, __u32 w, int lv, int nlv)
{
	struct bcpath *p = bd->p;

	if (p->nsteps == STEPS_MAX)
		return -1;
	if (p->nsteps == bd->cap) {
		int cap = bd->cap ? 2 * bd->cap : 64;
		struct bcpath_step *more = realloc(p->steps, cap * sizeof(*more));

		if (!more)
			return -ENOMEM;
		p->steps = more;
		bd->cap = cap;
	}
	p->total += w;
	p->steps[p->nsteps++] = (struct bcpath_step){ pc, p->total, (__u16)lv, (__u8)nlv };
	return 0;
}

static int kind_of(const struct bcpath_ops *ops, __u32 ins)
{
	return ops->kind[ins & 0xff];
}

/* The work an instruction records, in halves: none for what only moves
 * values between slots or jumps; half an instruction's for an upvalue
 * read (a constant once the JIT constifies it, else a load); one for the
 * rest (arithmetic: one IR instruction or two, a table access: its
 * reference, guard and load). */
#define W_WORK	2
/* A call of a builtin the JIT compiles in place: its operation and the
 * conversions around it, twice an arithmetic instruction's. A bit
 * operation on numbers records TOBIT, the operation and a CONV back. In
 * spans.lua's intfloat shape, a's 32 such calls are 75 % of the span's IR,
 * and the kernel's own sampling by address gives a's code 71 % of the
 * samples; one unit a call gave a 67 %, two give 71-73 %. */
#define W_BUILTIN	(2 * W_WORK)
static __u32 weight(const struct bcpath_ops *ops, __u32 ins)
{
	int k = kind_of(ops, ins);

	if (k == BCK_FREE || k == BCK_JMP || k == BCK_RET || k == BCK_CALL)
		return 0;
	return (int)(ins & 0xff) == ops->uget ? 1 : W_WORK;
}

static long branch_target(long x, __u32 ins)
{
	return x + 1 + (long)(ins >> 16) - BCBIAS_J;
}

/* Where the loop closed by the JFORL or JITERL at x starts; -1 unknown. */
static long loop_start(const struct bcpath_ops *ops, const struct bcpath_code *c, long x)
{
	for (long j = x - 1; j >= 0; j--) {
		int k = kind_of(ops, c->bc[j]);
		long t = branch_target(j, c->bc[j]);

		if ((k == BCK_FORI && t == x + 1) || (k == BCK_JMP && t == x - 1))
			return j + 1;
	}
	return -1;
}

static int walk(struct builder *bd, const struct bcpath_code *c, long s, long e, bool e_calls,
		int lv, int nlv, int depth);

/* Into the callee of the CALL at x of c (frames levels[lv .. lv + nlv)),
 * when the reader knows it: to its return, as a frame above. 1 when
 * followed, 0 when not, -ENOMEM. */
static int follow_call(struct builder *bd, const struct bcpath_code *c, long x, int lv, int nlv,
		       int depth)
{
	__u64 ret = c->addr + 4 * (__u64)(x + 1);
	struct bcpath_level callee = { 0 };
	struct bcpath_code cc;
	int at, uv = -1, slot = (c->bc[x] >> 8) & 0xff;

	/* Where the call's function came from: the last instruction before
	 * it that set its slot, when that is a UGET. */
	for (long i = x - 1; i >= 0 && i >= x - 32; i--)
		if (((c->bc[i] >> 8) & 0xff) == (__u32)slot && kind_of(bd->ops, c->bc[i]) != BCK_JMP) {
			if ((int)(c->bc[i] & 0xff) == bd->ops->uget)
				uv = (int)(c->bc[i] >> 16);
			break;
		}
	if (depth >= CALL_DEPTH || nlv >= 0xff || !bd->rd->callee ||
	    bd->rd->callee(bd->rd->ctx, &bd->p->levels[lv + nlv - 1], ret, uv, &callee) ||
	    bd->rd->code(bd->rd->ctx, callee.fn, 0, &cc))
		return 0;
	if ((at = levels_add(bd->p, nlv + 1)) < 0)
		return at;
	memmove(bd->p->levels + at, bd->p->levels + lv, nlv * sizeof(*bd->p->levels));
	/* The caller at its call (a Lua call), the callee above it. */
	bd->p->levels[at + nlv - 1].pc = ret;
	bd->p->levels[at + nlv] = (struct bcpath_level){ callee.fn, cc.addr + 4, callee.closure };
	return walk(bd, &cc, 0, -1, false, at, nlv + 1, depth + 1) == -ENOMEM ? -ENOMEM : 1;
}

/* Walk code c from instruction s to instruction e (not included), or to
 * the frame's return when e < 0, as the trace's recording went: a jump is
 * taken when that leads towards e (a loop's back edge only when e lies
 * behind), a conditional one never on the way to a return; a call is
 * followed into its callee, but for the one just before e when e_calls
 * (the path goes on in that callee's frame). Each visited instruction
 * becomes a step of frames levels[lv .. lv + nlv). */
static int walk(struct builder *bd, const struct bcpath_code *c, long s, long e, bool e_calls,
		int lv, int nlv, int depth)
{
	long x = s;

	for (int n = 0; n < WALK_MAX; n++) {
		__u32 ins;
		long t = -1;
		int k, err;
		bool take = false;

		if (x == e)
			return 0;
		if (x < 0 || x >= (long)c->n)
			return -1;
		ins = c->bc[x];
		k = kind_of(bd->ops, ins);
		if ((err = push(bd, c->addr + 4 * (__u64)(x + 1), weight(bd->ops, ins), lv, nlv)))
			return err;
		switch (k) {
		case BCK_CALL:
			/* A call of a Lua function records nothing of its own, its
			 * callee's bytecode does; one not followed is taken for a
			 * builtin the JIT compiled in place. */
			if (e_calls && x + 1 == e)
				break;
			if ((err = follow_call(bd, c, x, lv, nlv, depth)) < 0)
				return err;
			if (!err) {
				bd->p->steps[bd->p->nsteps - 1].cum += W_BUILTIN;
				bd->p->total += W_BUILTIN;
			}
			break;
		case BCK_RET:
			return e < 0 ? 0 : -1;
		case BCK_JMP:
			t = branch_target(x, ins);
			if (t > x) {
				bool cond = x > 0 && kind_of(bd->ops, c->bc[x - 1]) == BCK_TEST;

				take = !cond || (e > x && t <= e);
			} else {
				take = e >= 0 && e < x && t <= e;
			}
			break;
		case BCK_BACK:
			t = branch_target(x, ins);
			take = e >= 0 && e < x && t <= e;
			break;
		case BCK_JBACK:
			t = loop_start(bd->ops, c, x);
			take = t >= 0 && e >= 0 && e < x && t <= e;
			break;
		}
		x = take ? t : x + 1;
	}
	return -1;
}

/* The index of the instruction after the one before pc in c; -1 when pc
 * does not lie in c. */
static long after(const struct bcpath_code *c, __u64 pc)
{
	__u64 a = pc & ~CALL_MASK;

	if (a < c->addr + 4 || a > c->addr + 4 * (__u64)c->n || (a - c->addr) % 4)
		return -1;
	return (long)((a - c->addr) / 4);
}

/* A Lua function's frame (struct nupp_frame.fn: NUPP_FN_LUA is 0 in the
 * top byte), or the base frame as in memory. */
static bool lua_level(const struct bcpath_level *l)
{
	return !(l->fn >> 56);
}

static int build(struct builder *bd, const struct bcpath_level *a, int na,
		 const struct bcpath_level *b, int nb)
{
	const struct bcpath_reader *rd = bd->rd;
	struct bcpath_code c;
	int common = 0, err;
	long s, e;

	/* The base frame: as in memory (0) in one snapshot, its function
	 * as a constant in the other when the trace stored that slot. */
	if (na < 1 || nb < 1 || (a[0].fn && b[0].fn && a[0].fn != b[0].fn))
		return -1;
	/* The frames both have: the same function, called from the same place. */
	while (common + 1 < na && common + 1 < nb && a[common + 1].fn == b[common + 1].fn &&
	       (a[common].pc & ~CALL_MASK) == (b[common].pc & ~CALL_MASK))
		common++;
	/* A closure one snapshot holds as a constant is the other's too. */
	for (int k = 0; k <= common; k++)
		if (!bd->p->levels[k].closure)
			bd->p->levels[k].closure = b[k].closure;
	/* Out of the frames only a has, from its pc (or their return
	 * addresses) to their returns. */
	for (int j = na - 1; j > common; j--) {
		if (!lua_level(&a[j]))
			continue;	/* a builtin's frame: nothing of bytecode */
		if (rd->code(rd->ctx, a[j].fn, a[j].pc, &c) || (s = after(&c, a[j].pc)) < 0)
			return -1;
		if ((err = walk(bd, &c, j == na - 1 ? s - 1 : s, -1, false, 0, j + 1, 0)))
			return err;
	}
	/* Along the frame both have. */
	if (rd->code(rd->ctx, a[common].fn ? a[common].fn : b[common].fn, a[common].pc, &c) ||
	    (s = after(&c, a[common].pc)) < 0 ||
	    (e = after(&c, b[common].pc)) < 0)
		return -1;
	if ((err = walk(bd, &c, common == na - 1 ? s - 1 : s, common == nb - 1 ? e - 1 : e,
			common < nb - 1, 0, common + 1, 0)))
		return err;
	/* Into the frames only b has, from their first instruction to the
	 * call of the next or to b's pc. */
	for (int j = common + 1; j < nb; j++) {
		if (!lua_level(&b[j]))
			break;		/* into a builtin: the path ends at its call */
		if (rd->code(rd->ctx, b[j].fn, b[j].pc, &c) || (e = after(&c, b[j].pc)) < 0)
			return -1;
		if ((err = walk(bd, &c, 0, j == nb - 1 ? e - 1 : e, j < nb - 1, na, j + 1, 0)))
			return err;
	}
	return 0;
}

int bcpath_build(struct bcpath *p, const struct bcpath_ops *ops,
		 const struct bcpath_level *a, int na, const struct bcpath_level *b, int nb,
		 const struct bcpath_reader *rd)
{
	struct builder bd = { p, ops, rd, 0 };
	int err;

	memset(p, 0, sizeof(*p));
	if (na < 1 || nb < 1 || na + nb > 0xffff || na > 0xff || nb > 0xff)
		return -1;
	if (!(p->levels = malloc((na + nb) * sizeof(*p->levels))))
		return -ENOMEM;
	memcpy(p->levels, a, na * sizeof(*a));
	memcpy(p->levels + na, b, nb * sizeof(*b));
	p->nlevels = p->caplevels = na + nb;
	err = build(&bd, a, na, b, nb);
	if (!err && !p->nsteps)
		err = -1;
	if (err)
		bcpath_free(p);
	return err;
}

const struct bcpath_step *bcpath_at(const struct bcpath *p, __u64 num, __u64 den)
{
	int lo = 0, hi;
	__u64 at;

	if (!p->nsteps || !den)
		return NULL;
	if (num >= den)
		num = den - 1;
	if (!p->total)
		return &p->steps[num * p->nsteps / den];
	/* The first step whose weight reaches past the position. */
	at = num * p->total / den;
	hi = p->nsteps - 1;
	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (p->steps[mid].cum > at)
			hi = mid;
		else
			lo = mid + 1;
	}
	return &p->steps[lo];
}

void bcpath_free(struct bcpath *p)
{
	free(p->levels);
	free(p->steps);
	memset(p, 0, sizeof(*p));
}
