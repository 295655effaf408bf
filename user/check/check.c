// SPDX-License-Identifier: MIT
/*
 * check.c - trace aborts found in bytecode, without running it (check.h).
 *
 * One prototype is read in two passes. The first finds, for each stack
 * slot, the one builtin every write to it holds ("local gsub =
 * string.gsub" at the top of a function), if any. The second walks the
 * instructions in order, tracking exactly what each slot holds within
 * straight-line code and falling back to the first pass's answer at every
 * jump target. A child prototype is read after its parent, its upvalues
 * holding what the parent's slots held at its FNEW (when they are never
 * assigned again). What a call's callee holds decides what the recorder
 * does with it: lj_ffrecord.c's handler, or recff_nyi.
 *
 * Loops are the ranges of backward branches (FORL, ITERL, JMP). The
 * recorder aborts at the first blocker it meets: a blocker that every path
 * from its loop's head (or its function's entry) reaches only through
 * another blocker is never reached while that one stands.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/abort_site.h"
#include "check.h"

enum check_op {
	OP_MOV, OP_KSTR, OP_GGET, OP_TGETS, OP_UGET, OP_CALL, OP_CALLM, OP_CALLT, OP_CALLMT,
	OP_VARG, OP_FNEW, OP_KNIL, OP_ITERC, OP_ITERN, OP_FORI, OP_FORL, OP_ITERL, OP_JMP,
	OP_LOOP, OP_UCLO, OP_ISNEXT, OP_KSHORT, OP_KPRI, OP_TSETV, OP__N
};
static const char *const op_names[OP__N] = {
	"MOV", "KSTR", "GGET", "TGETS", "UGET", "CALL", "CALLM", "CALLT", "CALLMT",
	"VARG", "FNEW", "KNIL", "ITERC", "ITERN", "FORI", "FORL", "ITERL", "JMP",
	"LOOP", "UCLO", "ISNEXT", "KSHORT", "KPRI", "TSETV",
};

#define NSLOTS		256
#define STRVAL		(-1)	/* a slot holding a string value: its methods are string.* */
#define NILVAL		(-2)	/* a slot holding nil, put there by KPRI or KNIL */

/* ---- names: the builtins and their dotted prefixes ------------------------ */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_name(struct check_ctx *c, const char *s, size_t n, int *cap)
{
	if (c->nnames == *cap) {
		char **p = realloc(c->names, 2 * *cap * sizeof(*p));

		if (!p)
			return -1;
		c->names = p, *cap *= 2;
	}
	return (c->names[c->nnames++] = strndup(s, n)) ? 0 : -1;
}

int check__ctx_init(struct check_ctx *c, const struct lj_build *b, const struct lj_recorder *rec,
		    char *err, size_t errsz)
{
	int cap = 512, k = 0;

	memset(c, 0, sizeof(*c));
	c->b = b, c->rec = rec;
	for (int i = 0; i < OP__N; i++) {
		c->op[i] = -1;
		for (int o = 0; o < b->nbcnames; o++)
			if (!strcmp(b->bcnames[o], op_names[i]))
				c->op[i] = o;
		if (c->op[i] < 0) {
			snprintf(err, errsz, "the build has no bytecode %s", op_names[i]);
			return -1;
		}
	}
	for (const char *const *n = rec->nyi_bytecodes; *n; n++)
		for (int o = 0; o < b->nbcnames && o < 256; o++)
			if (!strcmp(b->bcnames[o], *n))
				c->nyi[o] = 1;
	if (!(c->names = malloc(cap * sizeof(*c->names))))
		goto oom;
	/* Every name, and each prefix before a dot ("jit.util" of
	 * "jit.util.funcinfo"); "buffer" is what require("string.buffer") gives. */
	for (int i = 0; i < rec->nbuiltins; i++) {
		const char *s = rec->builtins[i].name;

		for (const char *d = strchr(s, '.'); d; d = strchr(d + 1, '.'))
			if (add_name(c, s, d - s, &cap))
				goto oom;
		if (add_name(c, s, strlen(s), &cap))
			goto oom;
	}
	if (add_name(c, "require", 7, &cap))
		goto oom;
	qsort(c->names, c->nnames, sizeof(*c->names), cmp_str);
	for (int i = 0; i < c->nnames; i++)
		if (!k || strcmp(c->names[k - 1], c->names[i]))
			c->names[k++] = c->names[i];
		else
			free(c->names[i]);
	c->nnames = k;
	return 0;
oom:
	snprintf(err, errsz, "out of memory");
	check__ctx_free(c);
	return -1;
}

void check__ctx_free(struct check_ctx *c)
{
	for (int i = 0; i < c->nnames; i++)
		free(c->names[i]);
	free(c->names);
	memset(c, 0, sizeof(*c));
}

/* The id of a name (1-based), 0 when it is no builtin nor a prefix of one. */
static int name_id(const struct check_ctx *c, const char *s)
{
	char **p = bsearch(&s, c->names, c->nnames, sizeof(*c->names), cmp_str);

	return p ? (int)(p - c->names) + 1 : 0;
}

static const char *name_of(const struct check_ctx *c, int id)
{
	return id > 0 ? c->names[id - 1] : NULL;
}

/* path.key: a field of a module table, or a string method. */
static int field_id(const struct check_ctx *c, int base, const char *key)
{
	char buf[256];

	if (base == STRVAL)
		snprintf(buf, sizeof(buf), "string.%s", key);
	else if (base > 0)
		snprintf(buf, sizeof(buf), "%s.%s", name_of(c, base), key);
	else
		return 0;
	return name_id(c, buf);
}

/* What require(name) gives, for the builtin modules. */
static int module_id(const struct check_ctx *c, const char *name)
{
	return name_id(c, !strcmp(name, "string.buffer") ? "buffer" : name);
}

/* ---- one prototype -------------------------------------------------------- */

struct slots {
	int path[NSLOTS];		/* name id, STRVAL, 0 unknown */
	const char *kstr[NSLOTS];	/* the string constant it holds */
};

struct loop {
	int start, end;		/* instruction indices, both inside the loop */
	int line;
	int cold;		/* a for loop of constant bounds too short to get hot */
};

struct proto_walk {
	const struct check_ctx *c;
	const struct bc_chunk *ch;
	const struct bc_proto *pt;
	int fr2;		/* call arguments start at A+2 (LJ_FR2 builds) */
	const int *uvpath;	/* what each upvalue holds */
	int **child_uv;		/* by prototype: what its upvalues hold, from its FNEW */
	struct loop *loops;
	int nloops;
	unsigned char *target;	/* by instruction: a jump lands there */
	int *jsrc, *jdst, njumps;
	const char *path;
	struct check_result *r;
	size_t first;		/* this prototype's first finding in r */
};

static const char *kgc_str(const struct bc_proto *pt, int d)
{
	int i = pt->nkgc - 1 - d;

	return i >= 0 && i < pt->nkgc && pt->kgc[i].type == BC_KGC_STR ? pt->kgc[i].str : NULL;
}

static int is_op(const struct proto_walk *w, int op, enum check_op which)
{
	return op == w->c->op[which];
}

/* Where a branch instruction lands, -1 for any other. */
static int branch_target(const struct proto_walk *w, int j)
{
	__u32 ins = w->pt->ins[j];
	int op = bc_op(ins);
	static const enum check_op br[] = { OP_JMP, OP_FORI, OP_FORL, OP_ITERL, OP_LOOP, OP_UCLO,
					    OP_ISNEXT };

	for (size_t i = 0; i < sizeof(br) / sizeof(br[0]); i++)
		if (is_op(w, op, br[i])) {
			int t = j + 1 + bc_j(ins);

			if (is_op(w, op, OP_UCLO) && bc_d(ins) == 0)
				return -1;
			return t >= 0 && t <= w->pt->nins ? t : -1;
		}
	return -1;
}

/* Does the for loop whose body starts at t and whose FORL is at j run a
 * constant number of times, too few for the loop to get hot? Its FORI's
 * start, stop and step are set by the three instructions before it. */
static int cold_for(const struct proto_walk *w, int t, int j)
{
	const struct bc_proto *pt = w->pt;
	int kshort = w->c->op[OP_KSHORT], v[3], seen = 0;

	if (t < 1 || !is_op(w, bc_op(pt->ins[j]), OP_FORL) || !is_op(w, bc_op(pt->ins[t - 1]), OP_FORI))
		return 0;
	for (int i = t - 2; i >= 0 && i >= t - 4; i--) {
		__u32 ins = pt->ins[i];
		int a = bc_a(ins) - bc_a(pt->ins[t - 1]);

		if (bc_op(ins) != kshort || a < 0 || a > 2)
			break;
		v[a] = (__s16)bc_d(ins), seen |= 1 << a;
	}
	if (seen != 7 || v[2] == 0)
		return 0;
	return (v[1] - v[0]) / v[2] + 1 < w->c->rec->hot_iterations;
}

static int find_loops(struct proto_walk *w)
{
	const struct bc_proto *pt = w->pt;

	w->target = calloc(pt->nins + 1, 1);
	w->loops = calloc(pt->nins + 1, sizeof(*w->loops));
	w->jsrc = calloc(pt->nins + 1, sizeof(int));
	w->jdst = calloc(pt->nins + 1, sizeof(int));
	if (!w->target || !w->loops || !w->jsrc || !w->jdst)
		return -1;
	for (int j = 0; j < pt->nins; j++) {
		int t = branch_target(w, j);

		if (t < 0)
			continue;
		w->target[t] = 1;
		w->jsrc[w->njumps] = j, w->jdst[w->njumps++] = t;
		if (t <= j) {
			struct loop *l = &w->loops[w->nloops++];
			int head = t > 0 ? bc_op(pt->ins[t - 1]) : -1;

			l->start = t, l->end = j;
			l->cold = cold_for(w, t, j);
			/* A for loop's FORI, an iterator loop's JMP to its ITERC,
			 * stand on the loop's own line; a while loop starts at t. */
			l->line = t > 0 && (is_op(w, head, OP_FORI) || is_op(w, head, OP_JMP) ||
					    is_op(w, head, OP_ISNEXT)) ? pt->line[t - 1] : pt->line[t];
		}
	}
	return 0;
}

/* The innermost loop holding instruction j, NULL none. */
static const struct loop *loop_of(const struct proto_walk *w, int j)
{
	const struct loop *best = NULL;

	for (int i = 0; i < w->nloops; i++) {
		const struct loop *l = &w->loops[i];

		if (l->start <= j && j <= l->end && (!best || l->end - l->start < best->end - best->start))
			best = l;
	}
	return best;
}

/* The effect of instruction j on what the slots hold. */
static void transfer(const struct proto_walk *w, int j, struct slots *s)
{
	const struct check_ctx *c = w->c;
	__u32 ins = w->pt->ins[j];
	int op = bc_op(ins), a = bc_a(ins), d = bc_d(ins);

	if (is_op(w, op, OP_MOV)) {
		s->path[a] = s->path[d & 0xff], s->kstr[a] = s->kstr[d & 0xff];
	} else if (is_op(w, op, OP_KSTR)) {
		s->path[a] = STRVAL, s->kstr[a] = kgc_str(w->pt, d);
	} else if (is_op(w, op, OP_GGET)) {
		const char *k = kgc_str(w->pt, d);

		s->path[a] = k ? name_id(c, k) : 0, s->kstr[a] = NULL;
	} else if (is_op(w, op, OP_TGETS)) {
		const char *k = kgc_str(w->pt, bc_c(ins));

		s->path[a] = k ? field_id(c, s->path[bc_b(ins)], k) : 0, s->kstr[a] = NULL;
	} else if (is_op(w, op, OP_UGET)) {
		s->path[a] = d < w->pt->nuv ? w->uvpath[d] : 0, s->kstr[a] = NULL;
	} else if (is_op(w, op, OP_CALL) || is_op(w, op, OP_CALLM)) {
		const char *callee = name_of(c, s->path[a]);
		int arg = a + 1 + w->fr2, mod = 0;

		/* local ffi = require("ffi") */
		if (callee && !strcmp(callee, "require") && arg < NSLOTS && s->kstr[arg])
			mod = module_id(c, s->kstr[arg]);
		for (int i = a; i < NSLOTS; i++)
			s->path[i] = 0, s->kstr[i] = NULL;
		if (bc_c(ins) >= 2)
			s->path[a] = mod;
	} else if (is_op(w, op, OP_VARG) || is_op(w, op, OP_ITERC) || is_op(w, op, OP_ITERN)) {
		for (int i = a; i < NSLOTS; i++)
			s->path[i] = 0, s->kstr[i] = NULL;
	} else if (is_op(w, op, OP_KNIL)) {
		for (int i = a; i <= d && i < NSLOTS; i++)
			s->path[i] = NILVAL, s->kstr[i] = NULL;
	} else if (is_op(w, op, OP_KPRI)) {
		s->path[a] = d == 0 ? NILVAL : 0, s->kstr[a] = NULL;	/* D: 0 nil, 1 false, 2 true */
	} else if (op < c->b->nbcnames && c->b->bcmode[op].a == c->b->bcm_dst) {
		s->path[a] = 0, s->kstr[a] = NULL;
	}
}

static int add_finding(struct proto_walk *w, int j, const char *tmpl, const char *detail,
		       const char *raw_arg)
{
	struct check_result *r = w->r;
	const struct bc_proto *pt = w->pt;
	const struct loop *l = loop_of(w, j);
	struct check_finding *f;
	const char *name = w->ch->name;
	const struct trace_reason *f_row = trace_reason__by_text(tmpl);

	/* A file's main chunk runs once, but traces reach its straight code:
	 * a side trace of a loop's exit, a trace started in a callee that
	 * returns into it, each records on until it aborts. Its blockers are
	 * reported; its stitches and stops are not (nothing to gain there). */
	if (pt->parent < 0 && pt->firstline == 0 && name[0] == '@' && !l &&
	    !(f_row && !strcmp(f_row->cls, "blocker")))
		return 0;
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 64;
		void *p = realloc(r->f, cap * sizeof(*r->f));

		if (!p)
			return -1;
		r->f = p, r->cap = cap;
	}
	f = &r->f[r->n++];
	memset(f, 0, sizeof(*f));
	f->row = f_row;
	f->path = w->path;
	f->line = pt->line[j];
	f->loop_line = l ? l->line : 0;
	f->func_line = pt->firstline;
	f->func_last = pt->firstline + pt->numline;
	{
		/* A profile's frames name a chunk as jit.v does: the file's base name. */
		const char *base = name[0] == '@' || name[0] == '=' ? name + 1 : name;
		const char *slash = name[0] == '@' ? strrchr(base, '/') : NULL;

		snprintf(f->chunk, sizeof(f->chunk), "%s", slash ? slash + 1 : base);
	}
	f->pc = j + 1;	/* ins[j] is the instruction at pc j+1 */
	f->samples = -1;
	snprintf(f->reason, sizeof(f->reason), "%s", tmpl);
	snprintf(f->raw, sizeof(f->raw), "%s", tmpl);
	if (strstr(tmpl, "%d") || strstr(tmpl, "%s")) {
		char fmt[192];

		/* The templates hold one %d or %s: the VM's number, the name. */
		snprintf(fmt, sizeof(fmt), "%s", tmpl);
		*strchr(fmt, '%') = 0;
		snprintf(f->reason, sizeof(f->reason), "%s%s%s", fmt, detail, strchr(tmpl, '%') + 2);
		snprintf(f->raw, sizeof(f->raw), "%s%s%s", fmt, raw_arg, strchr(tmpl, '%') + 2);
	}
	if (f->row) {
		snprintf(f->reason_id, sizeof(f->reason_id), "%s%s%s", f->row->id, *detail ? "." : "", detail);
		f->severity = f->row->severity;
	} else {
		snprintf(f->reason_id, sizeof(f->reason_id), TRACE_REASON_UNKNOWN_ID);
		f->severity = "warn";
	}
	if (!w->c->rec->builtin_abort_at_caller && !strcmp(tmpl, "NYI: unsupported variant of FastFunc %s"))
		snprintf(f->location, sizeof(f->location), "%s", detail);	/* jit.v's fmtfunc */
	else if (abort_site__fmt_loc(0, pt->firstline, f->line, name[0], name, 0, strlen(name),
				     f->location, sizeof(f->location)))
		snprintf(f->location, sizeof(f->location), "?:%d", f->line);
	return 0;
}

/* string.format whose format is a constant without %s nor %p: compiled. */
static int format_compiled(const char *fmt)
{
	for (const char *p = fmt ? strchr(fmt, '%') : NULL; p; p = strchr(p, '%')) {
		p++;
		if (*p == '%') {
			p++;
			continue;
		}
		p += strspn(p, "-+ #0123456789.");
		if (*p == 's' || *p == 'p' || !*p)
			return 0;
	}
	return fmt != NULL;
}

static int in_list(const char *const *l, const char *s)
{
	for (; l && *l; l++)
		if (!strcmp(*l, s))
			return 1;
	return 0;
}

/* A call of a builtin at instruction j. */
static int check_call(struct proto_walk *w, int j, const struct slots *s)
{
	const struct check_ctx *c = w->c;
	const struct lj_recorder *rec = c->rec;
	__u32 ins = w->pt->ins[j];
	int op = bc_op(ins), a = bc_a(ins);
	const char *name = a < NSLOTS ? name_of(c, s->path[a]) : NULL;
	int kind = name ? lj_recorder__builtin(rec, name) : -1;

	/* pcall(f, ...) and xpcall(f, h, ...) are recorded as calls of f. */
	if (name && (!strcmp(name, "pcall") || !strcmp(name, "xpcall")) && a + 1 + w->fr2 < NSLOTS) {
		const char *f = name_of(c, s->path[a + 1 + w->fr2]);
		int k = f ? lj_recorder__builtin(rec, f) : -1;

		if (k == LJ_REC_NYI)
			name = f, kind = k;
	}

	if (kind == LJ_REC_NYI) {
		int next = j + 1 < w->pt->nins ? bc_op(w->pt->ins[j + 1]) : -1;
		int tail = is_op(w, op, OP_CALLT) || is_op(w, op, OP_CALLMT);

		if (rec->nyi_aborts)
			return add_finding(w, j, "NYI: unsupported variant of FastFunc %s", name, name);
		if (!rec->stitch || tail || in_list(rec->nostitch_builtins, name) ||
		    (next >= 0 && next < c->b->nbcnames && in_list(rec->nostitch_ops, c->b->bcnames[next])))
			return add_finding(w, j, "NYI: FastFunc %s (trace stops)", name, name);
		return add_finding(w, j, "NYI: FastFunc %s (stitched)", name, name);
	}
	if (kind == LJ_REC_ABORTS && a + 1 + w->fr2 < NSLOTS && s->kstr[a + 1 + w->fr2])
		/* Its handler aborts unless the argument is cdata (ffi.typeof):
		 * a string constant never is. */
		return add_finding(w, j, "NYI: unsupported variant of FastFunc %s", name, name);
	if (kind == LJ_REC_PARTIAL || kind == LJ_REC_ABORTS) {
		int arg = a + 1 + w->fr2;

		if (!strcmp(name, "string.format") && arg < NSLOTS && format_compiled(s->kstr[arg]))
			return 0;
		if (!strcmp(name, "select") && (is_op(w, op, OP_CALLM) ||
						 (arg < NSLOTS && s->kstr[arg] && !strcmp(s->kstr[arg], "#"))))
			return 0;	/* select('#', ...), select(n, ...): rec_varg's idiom */
		if (loop_of(w, j))
			return add_finding(w, j, "FastFunc %s: some arguments are not compiled", name, name);
	}
	return 0;
}

/* The findings of instruction j, before it runs. */
static int check_ins(struct proto_walk *w, int j, const struct slots *s)
{
	const struct check_ctx *c = w->c;
	__u32 ins = w->pt->ins[j];
	int op = bc_op(ins);
	char num[16];

	snprintf(num, sizeof(num), "%d", op);
	if (c->nyi[op])
		return add_finding(w, j, "NYI: bytecode %d", c->b->bcnames[op], num);
	if (is_op(w, op, OP_VARG) && bc_b(ins) == 0 && c->rec->varg_multi_nyi && loop_of(w, j)) {
		/* All the values of ... at the trace's base frame: NYI, but for
		 * select(n, ...) (rec_varg's select_detect). */
		__u32 nx = j + 1 < w->pt->nins ? w->pt->ins[j + 1] : 0;
		const char *callee = j + 1 < w->pt->nins ? name_of(c, s->path[bc_a(nx)]) : NULL;

		if (!(is_op(w, bc_op(nx), OP_CALLM) && bc_b(nx) == 2 && bc_c(nx) == 1 && callee &&
		      !strcmp(callee, "select")))
			return add_finding(w, j, "NYI: bytecode %d", c->b->bcnames[op], num);
	}
	if (is_op(w, op, OP_TSETV) && s->path[bc_c(ins)] == NILVAL)
		return add_finding(w, j, "store with nil or NaN key", "", "");	/* t[nil] = v */
	if (is_op(w, op, OP_CALL) || is_op(w, op, OP_CALLM) || is_op(w, op, OP_CALLT) ||
	    is_op(w, op, OP_CALLMT))
		return check_call(w, j, s);
	return 0;
}

/* Does the blocker at instruction b sit behind the one at a < b: no branch
 * from [from, a) lands in (a, b], and no loop starts in (a, b] (the exit of
 * an inner loop starts side traces that go on from there)? */
static int behind(const struct proto_walk *w, int from, int a, int b)
{
	for (int i = 0; i < w->njumps; i++)
		if (w->jsrc[i] >= from && w->jsrc[i] < a && w->jdst[i] > a && w->jdst[i] <= b)
			return 0;
	for (int i = 0; i < w->nloops; i++)
		if (w->loops[i].start > a && w->loops[i].start <= b)
			return 0;
	for (int j = a + 1; j < b; j++)	/* a trace started in a callee returns here */
		if (is_op(w, bc_op(w->pt->ins[j]), OP_CALL) || is_op(w, bc_op(w->pt->ins[j]), OP_CALLM))
			return 0;
	return 1;
}

static int walk_proto(struct proto_walk *w);

static int walk_children(struct proto_walk *w, int idx)
{
	struct proto_walk cw = *w;

	cw.pt = &w->ch->protos[idx];
	cw.uvpath = w->child_uv[idx] ? w->child_uv[idx] : (const int[NSLOTS]){ 0 };
	cw.loops = NULL, cw.nloops = 0, cw.target = NULL, cw.jsrc = cw.jdst = NULL, cw.njumps = 0;
	return walk_proto(&cw);
}

/* What both a and b hold: the meet of two paths into a jump target. */
static int meet(struct slots *into, const struct slots *from, int n)
{
	int changed = 0;

	for (int i = 0; i < n; i++) {
		if (into->path[i] != from->path[i] && into->path[i])
			into->path[i] = 0, changed = 1;
		if (into->kstr[i] != from->kstr[i] && into->kstr[i])
			into->kstr[i] = NULL, changed = 1;
	}
	return changed;
}

/* Flow state s into jump target t (its first arrival copies). */
static int flow(struct slots **in, int t, const struct slots *s, int n)
{
	if (!in[t]) {
		if (!(in[t] = malloc(sizeof(**in))))
			return -1;
		*in[t] = *s;
		return 1;
	}
	return meet(in[t], s, n);
}

/* What each slot holds on entry to each jump target: the meet over every
 * path into it, iterated until loops add nothing (a meet only ever forgets,
 * so this ends). */
static int settle(struct proto_walk *w, struct slots **in)
{
	const struct bc_proto *pt = w->pt;
	int n = pt->framesize + 1 < NSLOTS ? pt->framesize + 1 : NSLOTS;
	struct slots s;

	for (int round = 0, changed = 1; changed && round < 64; round++) {
		changed = 0;
		memset(&s, 0, sizeof(s));
		for (int j = 0; j < pt->nins; j++) {
			int t, c;

			if (w->target[j]) {
				if ((c = flow(in, j, &s, n)) < 0)
					return -1;
				changed |= c;
				s = *in[j];
			}
			transfer(w, j, &s);
			if ((t = branch_target(w, j)) >= 0 && t < pt->nins) {
				if ((c = flow(in, t, &s, n)) < 0)
					return -1;
				changed |= c;
			}
		}
	}
	return 0;
}

static int walk_proto(struct proto_walk *w)
{
	const struct bc_proto *pt = w->pt;
	int ret = -1;
	struct slots **in = NULL;
	int *blocker_at = NULL, nblockers = 0;
	struct slots s;

	w->first = w->r->n;
	if (find_loops(w) || !(in = calloc(pt->nins + 1, sizeof(*in))) || settle(w, in))
		goto out;
	/* The findings, and what each child's upvalues hold. */
	memset(&s, 0, sizeof(s));
	blocker_at = calloc(pt->nins + 1, sizeof(int));
	if (!blocker_at)
		goto out;
	for (int j = 0; j < pt->nins; j++) {
		__u32 ins = pt->ins[j];
		size_t n0 = w->r->n;

		if (w->target[j] && in[j])
			s = *in[j];
		if (check_ins(w, j, &s))
			goto out;
		for (size_t k = n0; k < w->r->n; k++)
			if (w->r->f[k].row && !strcmp(w->r->f[k].row->cls, "blocker"))
				blocker_at[nblockers++] = j;
		if (is_op(w, bc_op(ins), OP_FNEW)) {
			int ki = pt->nkgc - 1 - bc_d(ins);

			if (ki >= 0 && ki < pt->nkgc && pt->kgc[ki].type == BC_KGC_CHILD) {
				int child = pt->kgc[ki].child;
				const struct bc_proto *cp = &w->ch->protos[child];
				int *uv = calloc(NSLOTS, sizeof(int));

				if (!uv)
					goto out;
				for (int u = 0; u < cp->nuv && u < NSLOTS; u++) {
					int ref = cp->uv[u];

					if (ref & BC_UV_LOCAL)
						uv[u] = ref & BC_UV_IMMUTABLE ? s.path[ref & 0xff] : 0;
					else
						uv[u] = (ref & 0x3fff) < pt->nuv ? w->uvpath[ref & 0x3fff] : 0;
					if (uv[u] < 0)		/* a string or nil value */
						uv[u] = 0;
				}
				free(w->child_uv[child]);
				w->child_uv[child] = uv;
			}
		}
		transfer(w, j, &s);
	}
	/* Blockers: blacklist in a loop, warn outside, info behind another. */
	for (size_t i = w->first; i < w->r->n; i++) {
		struct check_finding *f = &w->r->f[i];
		int j = f->pc - 1;	/* ins[j] is the instruction at pc j+1 */
		const struct loop *l = loop_of(w, j);
		int from = l ? l->start : 0;

		if (!f->row || strcmp(f->row->cls, "blocker"))
			continue;
		/* A loop too short to get hot is never blacklisted. */
		f->severity = l && !l->cold ? "blacklist" : "warn";
		for (int k = 0; k < nblockers && blocker_at[k] < j; k++)
			if (blocker_at[k] >= from && behind(w, from, blocker_at[k], j)) {
				f->severity = "info";
				f->after_line = pt->line[blocker_at[k]];
				break;
			}
	}
	/* Children, after their parent: each FNEW told what they hold. */
	for (int k = 0; k < pt->nkgc; k++)
		if (pt->kgc[k].type == BC_KGC_CHILD && walk_children(w, pt->kgc[k].child))
			goto out;
	ret = 0;
out:
	for (int j = 0; in && j <= pt->nins; j++)
		free(in[j]);
	free(in);
	free(blocker_at);
	free(w->target), free(w->loops), free(w->jsrc), free(w->jdst);
	w->target = NULL, w->loops = NULL, w->jsrc = w->jdst = NULL;
	return ret;
}

int check__chunk(const struct check_ctx *c, const struct bc_chunk *ch, const char *path,
		 struct check_result *r)
{
	struct proto_walk w = { .c = c, .ch = ch, .r = r };
	static const int none[NSLOTS];
	char **np;
	int ret;

	if (!ch->nprotos)
		return 0;
	np = realloc(r->paths, (r->npaths + 1) * sizeof(*np));
	if (!np)
		return -1;
	r->paths = np;
	if (!(r->paths[r->npaths] = strdup(path)))
		return -1;
	w.path = r->paths[r->npaths++];
	w.fr2 = ch->fr2;
	w.child_uv = calloc(ch->nprotos, sizeof(*w.child_uv));
	if (!w.child_uv)
		return -1;
	w.pt = &ch->protos[ch->nprotos - 1];
	w.uvpath = none;
	ret = walk_proto(&w);
	for (int i = 0; i < ch->nprotos; i++)
		free(w.child_uv[i]);
	free(w.child_uv);
	return ret;
}

void check__result_free(struct check_result *r)
{
	for (size_t i = 0; i < r->npaths; i++)
		free(r->paths[i]);
	free(r->paths);
	free(r->f);
	memset(r, 0, sizeof(*r));
}

int check__is_blocker(const struct check_finding *f)
{
	return f->row && !strcmp(f->row->cls, "blocker") && strcmp(f->severity, "info");
}
