// SPDX-License-Identifier: MIT
/*
 * code_sites.c - nupp-bpf's probe sites in a LuaJIT build, found in its code.
 *
 * A stripped build still has .eh_frame, the bounds of every function (its
 * entries framed by libdw), and its exported lua_* API. From those anchors
 * the interpreter blob, the GC cycle probe and the trace-abort jcc are found
 * by decoding instructions with capstone, each by what the code does rather
 * than by its bytes; a site must be unique or it is reported as not found,
 * with the reason. code_sites__verify() checks one address again by the same
 * rules, decoding from the start of its function, before it may become a
 * uprobe: a breakpoint inside an instruction corrupts the traced process.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <capstone/capstone.h>
#include <gelf.h>
#include <elfutils/libdw.h>
#include "code_sites.h"
#include "x86_code.h"
#include "elf_file.h"
#include "base/util.h"

#define BFS_DEPTH	3		/* interpreter -> lj_trace_hot -> lj_trace_ins */
#define BFS_MAX_FUNCS	1024
#define TEST_WINDOW	16		/* load of traceno .. its test */
#define JCC_WINDOW	6		/* test .. jcc */
#define PATH_INSNS	64		/* jcc .. the stores to link and linktype */
#define PATH_JUMPS	4
#define MAX_MATCHES	8

/* ---- walking the calls from the interpreter -------------------------------- *
 * trace_state is never called directly: lj_trace_ins hands it to
 * lj_vm_cpcall. lj_trace_ins is reached from the interpreter (lj_trace_hot,
 * lj_dispatch_ins: one or two calls deep, as inlining decides), and so is
 * the GC's atomic phase (lj_gc_step; lj_gc_fullgc from lua_gc). Following
 * direct calls BFS_DEPTH levels from there reads ~10% of a build's code.
 */

struct walk {
	__u64 funcs[BFS_MAX_FUNCS];	/* visited, by FDE start */
	int nfuncs;
	__u64 cands[64];		/* functions passed to lj_vm_cpcall */
	int ncands;
	__u64 gc;			/* lj_gc_separateudata candidate */
	bool gc_atomic;			/* called with (g, 0) */
};

static bool add_unique(__u64 *v, int *n, int max, __u64 x)
{
	for (int i = 0; i < *n; i++)
		if (v[i] == x)
			return false;
	if (*n == max)
		return false;
	v[(*n)++] = x;
	return true;
}

/* Note what the function decoded in f->fn ([lo, hi)) tells w: the
 * functions it takes the address of when it calls lj_vm_cpcall (the
 * protected function goes in rcx, often by way of a callee-saved register
 * across a loop, so any lea of a function start counts), calls of the GC
 * candidate with all = 0. Its callees go to next (when given). */
static void note_calls(struct cfile *f, __u64 lo, __u64 hi, struct walk *w, __u64 *next, int *nnext)
{
	struct regs r = { 0 };
	bool cpcalls = false;

	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		__u64 t = in->target;

		if (in->flags & IN_LABEL)
			r.known = 0;
		if ((in->flags & (IN_CALL | IN_BRANCH)) && t && (t < lo || t >= hi)) {
			cpcalls |= t == f->cpcall;
			if (w->gc && t == w->gc && (in->flags & IN_CALL) && regs__known(&r, CODE_SITE_RSI, 0))
				w->gc_atomic = true;
			if (next && (t < f->vm_lo || t >= f->vm_hi) && t >= f->text_lo && t < f->text_hi)
				add_unique(next, nnext, BFS_MAX_FUNCS, t);
		}
		regs__step(&r, in);
	}
	for (size_t i = 0; cpcalls && i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		__u64 t = in->target;

		if (in->id == X86_INS_LEA && t && (t < lo || t >= hi) && (t < f->vm_lo || t >= f->vm_hi) &&
		    cfile__fde_start(f, t))
			add_unique(w->cands, &w->ncands, 64, t);
	}
}

/* Follow direct calls from roots, BFS_DEPTH levels deep. */
static void walk_calls(struct cfile *f, struct walk *w, const __u64 *roots, int nroots)
{
	__u64 (*level)[BFS_MAX_FUNCS] = calloc(2, sizeof(*level));
	int n = 0, cur = 0;

	if (!level)
		return;
	for (int i = 0; i < nroots; i++)
		add_unique(level[0], &n, BFS_MAX_FUNCS, roots[i]);
	for (int depth = 0; depth < BFS_DEPTH && n; depth++) {
		int nn = 0;

		for (int i = 0; i < n; i++) {
			__u64 a = level[cur][i], hi;

			if (!add_unique(w->funcs, &w->nfuncs, BFS_MAX_FUNCS, a) || cfile__decode_fde(f, a, &hi))
				continue;
			note_calls(f, a, hi, w, depth + 1 < BFS_DEPTH ? level[!cur] : NULL, &nn);
		}
		cur = !cur;
		n = nn;
	}
	free(level);
}

/* The direct callees of the interpreter blob outside it, plus the extra
 * root's (lua_gc's): where the walk starts. */
static int walk_roots(struct cfile *f, __u64 *roots, int max)
{
	int n = 0;
	__u64 gc = elf_file__func(f->ef, "lua_gc"), hi;

	if (cfile__decode_fn(f, f->vm_lo, f->vm_hi, true))
		return 0;
	for (size_t i = 0; i < f->fn.n; i++) {
		__u64 t = f->fn.v[i].target;

		if ((f->fn.v[i].flags & (IN_CALL | IN_BRANCH)) && t && (t < f->vm_lo || t >= f->vm_hi) &&
		    t >= f->text_lo && t < f->text_hi && cfile__fde_start(f, t))
			add_unique(roots, &n, max, t);
	}
	if (gc && !cfile__decode_fde(f, gc, &hi))
		for (size_t i = 0; i < f->fn.n; i++) {
			__u64 t = f->fn.v[i].target;

			if ((f->fn.v[i].flags & IN_CALL) && t && (t < gc || t >= hi) &&
			    t >= f->text_lo && t < f->text_hi && cfile__fde_start(f, t))
				add_unique(roots, &n, max, t);
		}
	return n;
}

/* ---- the GC cycle probe ---------------------------------------------------- *
 * lua_close calls lj_gc_separateudata(g, 1), and the GC's atomic phase
 * lj_gc_separateudata(g, 0) once per cycle. A compiler may inline the
 * latter and keep an out-of-line copy for lua_close alone (clang -O3 on
 * upstream does): a probe there would fire at close only, so the candidate
 * counts only when some call passes it 0.
 */

/* The one function lua_close calls with 1 in esi: 0 and a reason when none
 * or several. */
static __u64 gc_candidate(struct cfile *f, char *why, size_t whysz)
{
	__u64 a = elf_file__func(f->ef, "lua_close"), hi, found[8];
	struct regs r = { 0 };
	int n = 0;

	if (!a || cfile__decode_fde(f, a, &hi)) {
		snprintf(why, whysz, "not found: %s", a ? "lua_close does not decode" : "no lua_close export");
		return 0;
	}
	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];

		if ((in->flags & IN_LABEL))
			r.known = 0;
		if ((in->flags & IN_CALL) && in->target && (in->target < a || in->target >= hi) &&
		    regs__known(&r, CODE_SITE_RSI, 1) && (in->target < f->vm_lo || in->target >= f->vm_hi) &&
		    cfile__fde_start(f, in->target))
			add_unique(found, &n, 8, in->target);
		regs__step(&r, in);
	}
	if (n != 1) {
		snprintf(why, whysz, n ? "not found: lua_close calls %d functions with (g, 1)" :
			 "not found: lua_close calls no function with (g, 1) (inlined?)", n);
		return 0;
	}
	return found[0];
}

/* ---- the trace-abort site -------------------------------------------------- *
 * trace_abort(): traceno = J->cur.traceno; if (traceno) { J->cur.link = 0;
 * J->cur.linktype = LJ_TRLINK_NONE; ... }. Accepted, J in any GPR but rsp:
 *   - the flags: movzx/movsx/mov of word [J + traceno] into r, then, within
 *     TEST_WINDOW instructions without a label, branch or call between and
 *     J's register untouched, test r,r or cmp r,0 of at least 16 bits (of r
 *     or of a 32/64-bit copy, or a new 16-bit extension, of it); or cmp word
 *     [J + traceno],0 / test word [J + traceno],0xffff;
 *   - then je/jne within JCC_WINDOW instructions, only moves, lea or nop
 *     between, no label;
 *   - its traceno != 0 side (jne's target, je's fall-through), followed
 *     through fall-throughs and up to PATH_JUMPS direct jmps for PATH_INSNS
 *     instructions before any call, return or write of J's register, stores
 *     0 (an immediate, or a register zeroed in that block) to word
 *     [J + link] and to byte [J + linktype].
 * No other read of traceno is followed by both stores. A compiler may copy
 * the test into each path that reaches it (gcc does, for the retry path):
 * all matches must then lie in one function, with J in one register.
 */

/* A 16-bit memory operand [base + J_cur_traceno], base a GPR: J->cur.traceno. */
static bool is_traceno(const struct opnd *o, const struct lj_layout *lj)
{
	return o->type == X86_OP_MEM && o->size == 2 && o->base >= 0 && o->base != CODE_SITE_RSP &&
	       o->index == NO_REG && o->v == lj->J_cur_traceno;
}

/* Does fn.v[i] compare a register of holders with 0 (test r,r / cmp r,0)? */
static bool tests_holder(const struct ins *in, __u16 holders, bool zext)
{
	const struct opnd *a = &in->op[0], *b = &in->op[1];

	if (a->type != X86_OP_REG || a->reg < 0 || !(holders >> a->reg & 1) || a->size < 2)
		return false;
	/* A plain 16-bit load leaves the register's upper bits as they were. */
	if (!zext && a->size != 2)
		return false;
	if (in->id == X86_INS_TEST)
		return b->type == X86_OP_REG && b->reg == a->reg && b->size == a->size;
	return in->id == X86_INS_CMP && b->type == X86_OP_IMM && b->v == 0;
}

static bool copies_holder(const struct ins *in, __u16 holders, bool zext)
{
	const struct opnd *d = &in->op[0], *s = &in->op[1];

	if (d->type != X86_OP_REG || d->reg < 0 || d->size < 4 || s->type != X86_OP_REG || s->reg < 0 ||
	    !(holders >> s->reg & 1))
		return false;
	if (in->id == X86_INS_MOV)
		return zext && s->size >= 4;
	return (in->id == X86_INS_MOVZX || in->id == X86_INS_MOVSX) && s->size == 2;
}

/* From a load of traceno at v[i] into a register: the index of the test of
 * that register (or a copy of it), or -1. */
static long load_then_test(const struct ins *v, size_t n, size_t i, int jreg)
{
	const struct ins *ld = &v[i];
	bool zext = ld->id == X86_INS_MOVZX || ld->id == X86_INS_MOVSX;
	__u16 holders;

	if ((!zext && ld->id != X86_INS_MOV) || ld->op[0].type != X86_OP_REG || ld->op[0].reg < 0 ||
	    ld->op[0].reg == jreg)
		return -1;
	holders = 1u << ld->op[0].reg;
	for (size_t k = i + 1; k < n && k <= i + TEST_WINDOW; k++) {
		const struct ins *in = &v[k];

		if (in->flags & (IN_LABEL | IN_BRANCH | IN_CALL | IN_STOP) || (in->wregs >> jreg & 1))
			return -1;
		if (tests_holder(in, holders, zext))
			return k;
		/* A copy holds traceno too: a 32/64-bit move of a zero-extended
		 * value, or a new extension of its low 16 bits (gcc -O1). */
		if (copies_holder(in, holders, zext)) {
			holders |= 1u << in->op[0].reg;
			zext = true;
			continue;
		}
		holders &= ~in->wregs;
		if (!holders)
			return -1;
	}
	return -1;
}

/* Between the test and its jcc: moves only, whatever the decoder says of
 * the flags. */
static bool keeps_flags(const struct ins *in)
{
	static const unsigned int ids[] = {
		X86_INS_MOV, X86_INS_MOVZX, X86_INS_MOVSX, X86_INS_MOVSXD, X86_INS_MOVABS,
		X86_INS_LEA, X86_INS_NOP,
	};

	if (in->flags & (IN_ZF | IN_BRANCH | IN_CALL | IN_STOP))
		return false;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (in->id == ids[i])
			return true;
	return false;
}

/* v[i] reads J->cur.traceno: the index of the je/jne that branches on it
 * (through a test of the loaded value, or a cmp/test of the memory), with
 * J's register in *jreg; -1 when v[i] does not start such a sequence. */
static long traceno_jcc(const struct ins *v, size_t n, size_t i, const struct lj_layout *lj, int *jreg)
{
	const struct ins *in = &v[i];
	long f = -1;

	if (is_traceno(&in->op[1], lj)) {
		*jreg = in->op[1].base;
		f = load_then_test(v, n, i, *jreg);
	} else if (is_traceno(&in->op[0], lj)) {
		*jreg = in->op[0].base;
		if ((in->id == X86_INS_CMP && in->op[1].type == X86_OP_IMM && in->op[1].v == 0) ||
		    (in->id == X86_INS_TEST && in->op[1].type == X86_OP_IMM && (in->op[1].v & 0xffff) == 0xffff))
			f = i;
	}
	if (f < 0)
		return -1;
	for (size_t m = f + 1; m < n && m <= (size_t)f + JCC_WINDOW; m++) {
		const struct ins *j = &v[m];

		if (j->flags & IN_LABEL)
			return -1;
		if (j->id == X86_INS_JE || j->id == X86_INS_JNE)
			return m;
		if (!keeps_flags(j) || (j->wregs >> *jreg & 1))
			return -1;
	}
	return -1;
}

/* Is in a store of 0 (immediate, or a register known to be 0) of size
 * bytes to [jreg + off]? */
static bool stores_zero(const struct ins *in, const struct regs *r, int jreg, __u32 off, int size)
{
	const struct opnd *d = &in->op[0], *s = &in->op[1];

	if (in->id != X86_INS_MOV || d->type != X86_OP_MEM || d->base != jreg || d->index != NO_REG ||
	    d->v != off || d->size != size)
		return false;
	return (s->type == X86_OP_IMM && s->v == 0) || (s->type == X86_OP_REG && regs__known(r, s->reg, 0));
}

/* Does the path from addr (traceno != 0) store 0 to J->cur.link and
 * J->cur.linktype through jreg before any call, return or change of jreg?
 * Followed: fall-through, and direct jmps. */
static bool clears_link(struct cfile *f, __u64 addr, int jreg, struct regs r)
{
	const struct lj_layout *lj = f->lj;
	bool link = false, type = false;
	int jumps = 0;

	for (int k = 0; k < PATH_INSNS; k++) {
		struct ins in;

		if (cfile__decode_at(f, addr, &in))
			return false;
		link |= stores_zero(&in, &r, jreg, lj->J_cur_link, 2);
		type |= stores_zero(&in, &r, jreg, lj->J_cur_linktype, 1);
		if (link && type)
			return true;
		if ((in.flags & (IN_CALL | IN_STOP)) || (in.wregs >> jreg & 1))
			return false;
		regs__step(&r, &in);
		if ((in.flags & IN_BRANCH) && !(in.flags & IN_JCC)) {
			if (++jumps > PATH_JUMPS)
				return false;
			addr = in.target;
		} else {
			addr += in.size;
		}
	}
	return false;
}

struct match {
	__u64 jcc;
	int jreg;
};

/* The jcc at v[j] (flags from traceno, J in jreg, registers r before it):
 * does its traceno != 0 side clear the link? */
static bool abort_jcc(struct cfile *f, const struct ins *j, int jreg, const struct regs *r)
{
	__u64 nonzero = j->id == X86_INS_JNE ? j->target : j->addr + j->size;

	return clears_link(f, nonzero, jreg, *r);
}

/* Search the function decoded in f->fn for trace_abort's jcc; add to m. */
static void match_fn(struct cfile *f, struct match *m, int *nm)
{
	const struct ins *v = f->fn.v;
	size_t n = f->fn.n;
	struct regs r = { 0 }, at_jcc;

	for (size_t i = 0; i < n; i++) {
		int jreg;
		long j = traceno_jcc(v, n, i, f->lj, &jreg);

		if (j >= 0) {
			at_jcc = r;
			for (size_t k = i; k < (size_t)j; k++)
				regs__step(&at_jcc, &v[k]);
			if (abort_jcc(f, &v[j], jreg, &at_jcc)) {
				bool dup = false;

				for (int q = 0; q < *nm && q < MAX_MATCHES; q++)
					dup |= m[q].jcc == v[j].addr;
				if (!dup && *nm < MAX_MATCHES)
					m[*nm] = (struct match){ v[j].addr, jreg };
				*nm += !dup;
			}
		}
		regs__step(&r, &v[i]);
	}
}

/* Every function of the text: the trace-abort search (unless m is NULL),
 * and the calls of the GC candidate, everywhere. */
static void scan_all(struct cfile *f, struct walk *w, struct match *m, int *nm)
{
	for (size_t i = 0; i < f->nfdes; i++) {
		__u64 lo = f->fdes[i].lo, hi = f->fdes[i].hi;

		if (lo < f->text_lo || hi > f->text_hi || (lo >= f->vm_lo && lo < f->vm_hi) ||
		    cfile__decode_fn(f, lo, hi, false))
			continue;
		note_calls(f, lo, hi, w, NULL, NULL);
		if (m)
			match_fn(f, m, nm);
	}
}

/* Whether the file holds the JIT compiler: its parameter names (lj_jit.h
 * JIT_PARAMDEF, for jit.opt) are in .rodata only then. Used to word why no
 * site was found, never to find one. */
static bool has_jit_params(struct cfile *f)
{
	size_t n = 0;
	const char *p = elf_file__section(f->ef, ".rodata", &n);

	return p && memmem(p, n, "hotloop", 7) && memmem(p, n, "maxmcode", 8);
}

static int cmp_match(const void *a, const void *b)
{
	const struct match *x = a, *y = b;

	return x->jcc < y->jcc ? -1 : x->jcc > y->jcc;
}

/* All matches must be copies of one test: in one function, through one J
 * register. The first in address order is the site, the others its copies. */
static void set_abort(struct cfile *f, struct lj_code_sites *out, struct match *m, int nm)
{
	__u64 lo = 0, hi = 0, lo2, hi2;
	bool one = nm > 0 && nm <= CODE_SITES_MAX_COPIES && !cfile__fde_range(f, m[0].jcc, &lo, &hi);

	qsort(m, nm < MAX_MATCHES ? nm : MAX_MATCHES, sizeof(*m), cmp_match);
	for (int i = 1; one && i < nm; i++)
		one = !cfile__fde_range(f, m[i].jcc, &lo2, &hi2) && lo2 == lo && m[i].jreg == m[0].jreg;
	if (one) {
		out->abort_site = m[0].jcc;
		out->abort_j_reg = m[0].jreg;
		for (int i = 1; i < nm; i++)
			out->abort_more[out->abort_nmore++] = m[i].jcc;
		return;
	}
	if (nm)
		snprintf(out->abort_why, sizeof(out->abort_why), "not found: %d jccs on J->cur.traceno "
			 "clear J->cur.link, not in one function through one register", nm);
	else if (!has_jit_params(f))
		snprintf(out->abort_why, sizeof(out->abort_why), "not found: no JIT (the build has no JIT compiler)");
	else
		snprintf(out->abort_why, sizeof(out->abort_why),
			 "not found: no jcc on J->cur.traceno that clears J->cur.link in any function");
}

/* Search the functions handed to lj_vm_cpcall (trace_state), then their
 * callees (trace_abort kept apart); nothing: 0 matches. */
static int match_cands(struct cfile *f, const struct walk *w, struct match *m)
{
	__u64 next[256];
	int nm = 0, nnext = 0;

	for (int i = 0; i < w->ncands; i++) {
		__u64 hi;

		if (!cfile__decode_fde(f, w->cands[i], &hi))
			match_fn(f, m, &nm);
	}
	if (nm)
		return nm;
	for (int i = 0; i < w->ncands; i++) {
		__u64 hi;

		if (cfile__decode_fde(f, w->cands[i], &hi))
			continue;
		for (size_t k = 0; k < f->fn.n; k++)
			if ((f->fn.v[k].flags & IN_CALL) && f->fn.v[k].target)
				add_unique(next, &nnext, 256, f->fn.v[k].target);
	}
	for (int i = 0; i < nnext; i++) {
		__u64 hi;

		if ((next[i] < f->vm_lo || next[i] >= f->vm_hi) && !cfile__decode_fde(f, next[i], &hi))
			match_fn(f, m, &nm);
	}
	return nm;
}

static void find_sites(struct cfile *f, int flags, struct lj_code_sites *out)
{
	const struct lj_layout *lj = f->lj;
	bool offsets = lj->J_cur_traceno && lj->J_cur_link && lj->J_cur_linktype;
	bool chain = !(flags & CODE_SITES_FULL_SCAN);
	struct walk *w = calloc(1, sizeof(*w));
	struct match m[MAX_MATCHES];
	__u64 roots[512];
	int nm = 0;

	if (!w) {
		snprintf(out->gc_why, sizeof(out->gc_why), "out of memory");
		snprintf(out->abort_why, sizeof(out->abort_why), "out of memory");
		return;
	}
	w->gc = gc_candidate(f, out->gc_why, sizeof(out->gc_why));
	if (chain) {
		walk_calls(f, w, roots, walk_roots(f, roots, 512));
		nm = offsets ? match_cands(f, w, m) : 0;
	}
	/* A trace-abort site the calls from the interpreter do not show, all
	 * code may. The GC's atomic phase they do reach (lj_gc_step from the
	 * interpreter, lj_gc_fullgc from lua_gc): a call with (g, 0) they miss
	 * is not looked for elsewhere. */
	if (!chain || (offsets && !nm)) {
		w->gc_atomic = false;
		scan_all(f, w, offsets ? m : NULL, &nm);
	}
	if (offsets)
		set_abort(f, out, m, nm);
	else
		snprintf(out->abort_why, sizeof(out->abort_why),
			 "not looked for: the layout gives no J->cur traceno/link/linktype offsets");
	if (w->gc && w->gc_atomic)
		out->gc_cycle = w->gc;
	else if (w->gc)
		snprintf(out->gc_why, sizeof(out->gc_why), "not found: the callee of lua_close with (g, 1), "
			 "0x%llx, is never called with (g, 0) (inlined into the GC's atomic phase?)",
			 (unsigned long long)w->gc);
	free(w);
}

int code_sites__find_opts(const char *path, const struct lj_layout *lj, int flags,
			  struct lj_code_sites *out, char *err, size_t errsz)
{
	struct cfile f;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	out->abort_j_reg = -1;
	if (cfile__open(&f, path, lj, err, errsz))
		goto out;
	if (cfile__find_vm(&f, err, errsz))
		goto out;
	out->vm_lo = f.vm_lo;
	out->vm_hi = f.vm_hi;
	find_sites(&f, flags, out);
	ret = 0;
out:
	cfile__close(&f);
	return ret;
}

int code_sites__find(const char *path, const struct lj_layout *lj, struct lj_code_sites *out,
		     char *err, size_t errsz)
{
	return code_sites__find_opts(path, lj, 0, out, err, errsz);
}

/* ---- verification ---------------------------------------------------------- */

/* The jcc at index j of f->fn: is it the traceno jcc, by the rules above? */
static int verify_jcc(struct cfile *f, size_t j, char *err, size_t errsz)
{
	const struct ins *v = f->fn.v;
	struct regs r = { 0 }, at;

	if (!f->lj->J_cur_traceno || !f->lj->J_cur_link || !f->lj->J_cur_linktype) {
		snprintf(err, errsz, "the layout gives no J->cur traceno/link/linktype offsets");
		return -1;
	}
	if (v[j].id != X86_INS_JE && v[j].id != X86_INS_JNE) {
		snprintf(err, errsz, "0x%llx is not a je/jne", (unsigned long long)v[j].addr);
		return -1;
	}
	for (size_t i = 0; i < j; i++) {
		int jreg;

		if (i + TEST_WINDOW + JCC_WINDOW + 1 >= j && traceno_jcc(v, f->fn.n, i, f->lj, &jreg) == (long)j) {
			at = r;
			for (size_t k = i; k < j; k++)
				regs__step(&at, &v[k]);
			if (abort_jcc(f, &v[j], jreg, &at))
				return 0;
		}
		regs__step(&r, &v[i]);
	}
	snprintf(err, errsz, "the jcc at 0x%llx does not branch on J->cur.traceno to clear the link",
		 (unsigned long long)v[j].addr);
	return -1;
}

/* code_sites__verify is asked of one file again and again: for each site
 * when a build is identified, again before each probe, and so for every
 * process of a server. The file last verified stays open, its FDE table
 * read and its last function decoded, while it is the same file (device,
 * inode, size and modification time, from a stat of the path). */
static struct {
	pthread_mutex_t lock;
	struct cfile f;
	struct stat st;
	bool open;
	__u64 fn_lo, fn_hi;	/* f.fn holds [fn_lo, fn_hi) decoded; fn_hi 0: nothing */
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The kept file, opened afresh when path is another file; NULL with why. */
static struct cfile *kept_file(const char *path, const struct lj_layout *lj, char *err,
			       size_t errsz)
{
	struct stat st;

	if (stat(path, &st)) {
		snprintf(err, errsz, "cannot read it: %s", strerror(errno));
		return NULL;
	}
	if (!kept.open || !same_file(&st, &kept.st)) {
		if (kept.open)
			cfile__close(&kept.f);
		kept.open = false;
		kept.fn_hi = 0;
		if (cfile__open(&kept.f, path, lj, err, errsz)) {
			cfile__close(&kept.f);
			return NULL;
		}
		kept.open = true;
		kept.st = st;
	}
	kept.f.lj = lj;
	return &kept.f;
}

/* Sites verified in this process: the build cache's entry is verified when
 * it is read, and the same sites again just before they are probed. A
 * site holds for the file kept_file() keeps (by the same test that keeps
 * its decoded function), its kind and the layout it was verified with. */
static struct verified_site {
	struct stat st;
	__u64 vaddr;
	int kind;
	struct lj_layout lj;
} verified[8];
static unsigned nverified;

static bool verified_before(__u64 vaddr, int kind, const struct lj_layout *lj)
{
	for (unsigned i = 0; i < nverified && i < (sizeof(verified) / sizeof(verified[0])); i++) {
		const struct verified_site *v = &verified[i];

		if (v->vaddr == vaddr && v->kind == kind && same_file(&v->st, &kept.st) &&
		    !memcmp(&v->lj, lj, sizeof(*lj)))
			return true;
	}
	return false;
}

/* Instructions the kernel's x86 uprobes emulate (arch/x86/kernel/uprobes.c:
 * branch_setup_xol_ops, push_setup_xol_ops), in the forms it takes without
 * prefixes: a jcc (rel8, rel32), a jmp or call to an immediate, a push of a
 * 64-bit register. */
static bool emulated(const struct ins *in)
{
	if (in->flags & IN_JCC)
		return in->size == 2 || in->size == 6;
	if (in->id == X86_INS_JMP)
		return in->op[0].type == X86_OP_IMM && (in->size == 2 || in->size == 5);
	if (in->id == X86_INS_CALL)
		return in->op[0].type == X86_OP_IMM && in->size == 5;
	if (in->id == X86_INS_PUSH)
		return in->op[0].type == X86_OP_REG && in->op[0].size == 8 && in->size <= 2;
	return false;
}

#define ARG_REGS	(1u << CODE_SITE_RDI | 1u << CODE_SITE_RSI | 1u << CODE_SITE_RDX | \
			 1u << CODE_SITE_RCX | 1u << CODE_SITE_R8 | 1u << CODE_SITE_R9 | \
			 1u << CODE_SITE_RSP)

/* Does in leave the arguments, rsp and memory as they were? */
static bool harmless(const struct ins *in)
{
	if (in->flags & (IN_BRANCH | IN_CALL | IN_STOP | IN_LABEL) || in->wregs & ARG_REGS)
		return false;
	switch (in->id) {
	case X86_INS_TEST: case X86_INS_CMP: case X86_INS_ENDBR64:
		return true;
	case X86_INS_MOV: case X86_INS_LEA: case X86_INS_XOR:
		return in->op[0].type == X86_OP_REG;
	default:
		return false;
	}
}

#define ENTRY_PROBE_LOOK	4	/* instructions looked at from the entry */

int code_sites__entry_probe(const char *path, __u64 vaddr, const struct lj_layout *lj,
			    __u64 *site, char *err, size_t errsz)
{
	struct cfile *f;
	long j;
	int ret;

	*site = vaddr;
	if ((ret = code_sites__verify(path, vaddr, CODE_SITE_FUNC_ENTRY, lj, err, errsz)))
		return ret;
	/* verify() keeps the function it decoded, unless it had verified the
	 * site before: decoded again then. */
	pthread_mutex_lock(&kept.lock);
	ret = -1;
	if (!(f = kept_file(path, lj, err, errsz)))
		goto out;
	if (kept.fn_lo != vaddr || !kept.fn_hi) {
		__u64 hi;

		kept.fn_hi = 0;
		if (cfile__decode_fde(f, vaddr, &hi)) {
			snprintf(err, errsz, "the function at 0x%llx does not decode",
				 (unsigned long long)vaddr);
			goto out;
		}
		kept.fn_lo = vaddr;
		kept.fn_hi = hi;
	}
	ret = 0;
	if ((j = insns__find(&f->fn, vaddr)) < 0)
		goto out;
	for (long i = j; i < j + ENTRY_PROBE_LOOK && i < (long)f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];

		if (emulated(in) && (i == j || !(in->flags & IN_LABEL))) {
			*site = in->addr;
			break;
		}
		if (!harmless(in))
			break;
	}
out:
	pthread_mutex_unlock(&kept.lock);
	return ret;
}

int code_sites__verify(const char *path, __u64 vaddr, int kind, const struct lj_layout *lj,
		       char *err, size_t errsz)
{
	struct cfile *f;
	__u64 lo, hi;
	long j;
	int ret = -1;

	pthread_mutex_lock(&kept.lock);
	if (!(f = kept_file(path, lj, err, errsz)))
		goto out;
	if (verified_before(vaddr, kind, lj)) {
		ret = 0;
		goto out;
	}
	if (cfile__fde_range(f, vaddr, &lo, &hi)) {
		snprintf(err, errsz, "0x%llx is in no .eh_frame FDE", (unsigned long long)vaddr);
		goto out;
	}
	if (kind == CODE_SITE_FUNC_ENTRY && lo != vaddr) {
		snprintf(err, errsz, "0x%llx is not a function entry (its FDE starts at 0x%llx)",
			 (unsigned long long)vaddr, (unsigned long long)lo);
		goto out;
	}
	if (kept.fn_lo != lo || kept.fn_hi != hi) {
		kept.fn_hi = 0;
		if (cfile__decode_fn(f, lo, hi, false)) {
			snprintf(err, errsz, "the function at 0x%llx does not decode",
				 (unsigned long long)lo);
			goto out;
		}
		kept.fn_lo = lo;
		kept.fn_hi = hi;
	}
	j = insns__find(&f->fn, vaddr);
	if (j < 0) {
		snprintf(err, errsz, "0x%llx is not an instruction boundary", (unsigned long long)vaddr);
		goto out;
	}
	if (kind == CODE_SITE_FUNC_ENTRY)
		ret = 0;
	else if (kind == CODE_SITE_TRACENO_JCC)
		ret = verify_jcc(f, j, err, errsz);
	else
		snprintf(err, errsz, "unknown code site kind %d", kind);
	if (!ret)
		verified[nverified++ % (sizeof(verified) / sizeof(verified[0]))] =
			(struct verified_site){ .st = kept.st, .vaddr = vaddr, .kind = kind, .lj = *lj };
out:
	pthread_mutex_unlock(&kept.lock);
	return ret;
}
