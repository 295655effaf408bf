// SPDX-License-Identifier: MIT
/*
 * check_proc.c - `nupp-bpf check -p PID`: the prototypes a running process
 * has loaded, read from its memory into the chunks check.c reads.
 *
 * Every GCproto lives in the GC heap: the process's writable private
 * mappings. They are found by a scan, each candidate verified as LuaJIT's
 * own code would see it, with the build's layout: the GC type byte says
 * PROTO, its first instruction is a function header (FUNCF/FUNCV and their
 * I/J variants) whose A operand is the frame size, its chunk name is a
 * string object, its line info lies after its bytecode. A child found as
 * a constant of an FNEW is joined to its parent, if it has its parent's
 * chunk name object (a freed prototype's constants may name another
 * chunk's child once their memory is reused); each prototype nothing
 * creates is the root of a chunk (a file's main chunk, a loadstring'd
 * one, or a function whose parent was collected). Upvalue references are
 * not part of the layout nupp-bpf carries: upvalues hold nothing known,
 * which only hides builtins reached through them.
 *
 * Instructions the JIT rewrote are read back as the parser wrote them:
 * JFORL/JITERL name a trace instead of their jump, which is found from the
 * loop's other end (the FORI that jumps past it, the JMP to its ITERC).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "luajit/lj_target.h"
#include "base/procmem.h"

#define LJ_GCT_STR	4	/* ~LJ_TSTR */
#define LJ_GCT_PROTO	7	/* ~LJ_TPROTO */
#define SCAN_BYTES	(256 << 10)
#define PROTOS_MAX	(1 << 20)

struct found {
	__u64 addr;
	int parent;		/* index, -1 none found */
	int index;		/* in its chunk */
	struct bc_proto pt;
	__u64 chunk;		/* its chunk name's GCstr, as the scan found it */
	char *name;		/* its chunk name */
};

struct scan {
	pid_t pid;
	const struct lj_layout *lj;
	const struct lj_build *b;
	int hdr[6];		/* FUNCF IFUNCF JFUNCF FUNCV IFUNCV JFUNCV */
	struct found *v;
	int n, cap;
};

static int op_named(const struct lj_build *b, const char *name)
{
	for (int o = 0; o < b->nbcnames; o++)
		if (!strcmp(b->bcnames[o], name))
			return o;
	return -1;
}

static int rd(const struct scan *s, void *dst, size_t n, __u64 a)
{
	return procmem__read(s->pid, dst, n, a);
}

/* A string object's bytes, malloc'ed; NULL when a is none. */
static char *read_str(const struct scan *s, __u64 a)
{
	__u8 gct;
	__u32 len;
	char *out;

	if (rd(s, &gct, 1, a + s->lj->gc_gct) || gct != LJ_GCT_STR ||
	    rd(s, &len, 4, a + s->lj->str_len) || len > (1 << 20) || !(out = malloc(len + 1)))
		return NULL;
	if (rd(s, out, len, a + s->lj->str_size)) {
		free(out);
		return NULL;
	}
	out[len] = 0;
	return out;
}

/* Is there a prototype at a (buf holds n bytes from a)? Its chunk name's
 * GCstr into *chunkp. */
static int proto_at(const struct scan *s, __u64 a, const __u8 *buf, size_t n, __u64 *chunkp)
{
	const struct lj_layout *lj = s->lj;
	__u32 sizebc, ins;
	__u64 chunk, k, li;
	__u8 gct;
	int op;

	if (n < lj->pt_size + 4 || buf[lj->gc_gct] != LJ_GCT_PROTO)
		return 0;
	memcpy(&sizebc, buf + lj->pt_sizebc, 4);
	memcpy(&ins, buf + lj->pt_size, 4);
	memcpy(&chunk, buf + lj->pt_chunkname, 8);
	memcpy(&k, buf + lj->pt_k, 8);
	memcpy(&li, buf + lj->pt_lineinfo, 8);
	op = ins & 0xff;
	if (sizebc == 0 || sizebc > (1 << 24) || k < a + lj->pt_size + 4ull * sizebc ||
	    (li && li < a + lj->pt_size + 4ull * sizebc))
		return 0;
	for (int i = 0; i < 6; i++)
		if (op == s->hdr[i])
			goto header;
	return 0;
header:
	*chunkp = chunk &= LJ_GCVMASK;
	return chunk && !rd(s, &gct, 1, chunk + lj->gc_gct) && gct == LJ_GCT_STR;
}

static int add(struct scan *s, __u64 a, __u64 chunk)
{
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 256;
		void *v = cap <= PROTOS_MAX ? realloc(s->v, cap * sizeof(*s->v)) : NULL;

		if (!v)
			return -1;
		s->v = v, s->cap = cap;
	}
	memset(&s->v[s->n], 0, sizeof(s->v[s->n]));
	s->v[s->n].addr = a;
	s->v[s->n].chunk = chunk;
	s->v[s->n].parent = -1;
	s->n++;
	return 0;
}

static void scan_memory(struct scan *s)
{
	struct proc_mapping m;
	__u64 chunk;
	__u8 *buf = malloc(SCAN_BYTES + 4096);
	FILE *f = procmem__maps_open(s->pid);

	while (buf && f && procmem__maps_next(f, &m)) {
		if (m.perms[0] != 'r' || m.perms[1] != 'w' || (m.file[0] && strcmp(m.file, "[heap]")))
			continue;
		for (__u64 a = m.start; a < m.end; a += SCAN_BYTES) {
			size_t n = m.end - a < SCAN_BYTES + 4096 ? m.end - a : SCAN_BYTES + 4096;

			if (rd(s, buf, n, a))
				break;
			for (size_t i = 0; i < n && i < SCAN_BYTES; i += 8)
				if (proto_at(s, a + i, buf + i, n - i, &chunk) && add(s, a + i, chunk))
					goto out;
		}
	}
out:
	if (f)
		fclose(f);
	free(buf);
}

static int by_addr(const void *x, const void *y)
{
	const struct found *a = x, *b = y;

	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int find(const struct scan *s, __u64 a)
{
	struct found key = { .addr = a };
	struct found *p = bsearch(&key, s->v, s->n, sizeof(*s->v), by_addr);

	return p ? (int)(p - s->v) : -1;
}

/* The jump target a loop instruction the JIT rewrote no longer holds. */
static void unjit(struct bc_proto *pt, const int *op)
{
	enum { FORI, FORL, ITERL, LOOP, JMP, JFORI, JFORL, IFORL, JITERL, IITERL, JLOOP, ILOOP, NOPS };

	for (int j = 0; j < pt->nins; j++) {
		__u32 ins = pt->ins[j];
		int o = bc_op(ins), t = -1;

		if (o == op[IFORL] || o == op[IITERL] || o == op[ILOOP] || o == op[JFORI]) {
			int base = o == op[IFORL] ? FORL : o == op[IITERL] ? ITERL : o == op[ILOOP] ? LOOP : FORI;

			pt->ins[j] = (ins & ~0xffu) | (__u32)op[base];
		} else if (o == op[JLOOP]) {
			pt->ins[j] = (ins & 0xffffu & ~0xffu) | (__u32)op[LOOP] | 0x8000u << 16;
		} else if (o == op[JFORL]) {
			/* The FORI (or JFORI) that jumps to just after it. */
			for (int i = j - 1; i >= 0 && t < 0; i--) {
				int oi = bc_op(pt->ins[i]);

				if ((oi == op[FORI] || oi == op[JFORI]) && i + 1 + bc_j(pt->ins[i]) == j + 1)
					t = i + 1;
			}
			if (t >= 0)
				pt->ins[j] = (ins & 0xff00u) | (__u32)op[FORL] | (__u32)(t - (j + 1) + 0x8000) << 16;
		} else if (o == op[JITERL]) {
			/* The JMP that enters the loop at its ITERC/ITERN, just before. */
			for (int i = j - 1; i >= 0 && t < 0; i--)
				if (bc_op(pt->ins[i]) == op[JMP] && i + 1 + bc_j(pt->ins[i]) == j - 1)
					t = i + 1;
			if (t >= 0)
				pt->ins[j] = (ins & 0xff00u) | (__u32)op[ITERL] | (__u32)(t - (j + 1) + 0x8000) << 16;
		}
	}
}

/* Read prototype i: bytecode, lines, the constants its instructions name. */
static int read_proto(struct scan *s, int i, const int *jop, const int *kop, int nkop)
{
	const struct lj_layout *lj = s->lj;
	struct found *fo = &s->v[i];
	struct bc_proto *pt = &fo->pt;
	__u32 sizebc, hdr;
	__u64 chunk, k, li;
	int maxd = -1;

	if (rd(s, &sizebc, 4, fo->addr + lj->pt_sizebc) || rd(s, &hdr, 4, fo->addr + lj->pt_size) ||
	    rd(s, &chunk, 8, fo->addr + lj->pt_chunkname) || rd(s, &k, 8, fo->addr + lj->pt_k) ||
	    rd(s, &li, 8, fo->addr + lj->pt_lineinfo) ||
	    rd(s, &pt->firstline, 4, fo->addr + lj->pt_firstline) ||
	    rd(s, &pt->numline, 4, fo->addr + lj->pt_numline))
		return -1;
	fo->name = read_str(s, chunk & LJ_GCVMASK);
	pt->nins = (int)sizebc - 1;
	pt->framesize = bc_a(hdr);
	pt->flags = bc_op(hdr) == s->hdr[3] || bc_op(hdr) == s->hdr[4] || bc_op(hdr) == s->hdr[5] ?
		    BC_PROTO_VARARG : 0;
	pt->ins = calloc(pt->nins + 1, 4);
	pt->line = calloc(pt->nins + 1, sizeof(int));
	pt->uv = calloc(1, sizeof(*pt->uv));
	pt->uvname = calloc(1, sizeof(*pt->uvname));
	if (!fo->name || !pt->ins || !pt->line || !pt->uv || !pt->uvname ||
	    rd(s, pt->ins, 4ul * pt->nins, fo->addr + lj->pt_size + 4))
		return -1;
	for (int j = 0; j < pt->nins; j++)
		pt->line[j] = pt->firstline;
	if (li) {
		int sz = pt->numline < 256 ? 1 : pt->numline < 65536 ? 2 : 4;
		__u8 *raw = malloc((size_t)sz * (pt->nins + 1));

		/* lj_debug_line(): lineinfo[pc - 1] for pc 1.., ins[j] is pc j+1 */
		if (raw && !rd(s, raw, (size_t)sz * pt->nins, li))
			for (int j = 0; j < pt->nins; j++) {
				const __u8 *p = raw + (size_t)sz * j;
				__u32 d = sz == 1 ? p[0] : sz == 2 ? (__u32)p[0] | p[1] << 8 :
					  (__u32)p[0] | p[1] << 8 | p[2] << 16 | (__u32)p[3] << 24;

				pt->line[j] = pt->firstline + (int)d;
			}
		free(raw);
	}
	unjit(pt, jop);
	/* The GC constants the instructions name: strings and children. */
	for (int j = 0; j < pt->nins; j++)
		for (int q = 0; q < nkop; q++)
			if (bc_op(pt->ins[j]) == kop[2 * q]) {
				int d = kop[2 * q + 1] ? bc_c(pt->ins[j]) : bc_d(pt->ins[j]);

				if (d > maxd)
					maxd = d;
			}
	pt->nkgc = maxd + 1;
	pt->kgc = calloc(pt->nkgc + 1, sizeof(*pt->kgc));
	if (!pt->kgc)
		return -1;
	for (int d = 0; d < pt->nkgc; d++) {
		struct bc_kgc *kc = &pt->kgc[pt->nkgc - 1 - d];
		__u64 ref;
		__u8 gct;

		kc->type = BC_KGC_TAB;	/* nothing check reads */
		if (rd(s, &ref, 8, k - 8ull * (d + 1)) || !(ref &= LJ_GCVMASK) ||
		    rd(s, &gct, 1, ref + lj->gc_gct))
			continue;
		if (gct == LJ_GCT_STR) {
			char *str = read_str(s, ref);

			if (str) {
				kc->type = BC_KGC_STR;
				kc->str = str;	/* freed with the chunk (free_found) */
				kc->len = strlen(str);
			}
		} else if (gct == LJ_GCT_PROTO) {
			int c = find(s, ref);

			/* The parser gives every prototype of a chunk the chunk's
			 * own name object: a parent naming another is a stale
			 * one (freed, its constants' memory reused since). */
			if (c >= 0 && c != i && s->v[c].chunk == (chunk & LJ_GCVMASK)) {
				kc->type = BC_KGC_CHILD;
				kc->child = c;	/* a scan index until the chunk is laid out */
				s->v[c].parent = i;
			}
		}
	}
	return 0;
}

/* The chunk rooted at prototype r: its prototypes children first, the
 * root last, CHILD constants renumbered to chunk indices. */
static int lay_out(struct scan *s, int r, int *order, int *norder)
{
	struct bc_proto *pt = &s->v[r].pt;

	for (int q = 0; q < pt->nkgc; q++)
		if (pt->kgc[q].type == BC_KGC_CHILD && s->v[pt->kgc[q].child].parent == r) {
			if (*norder >= PROTOS_MAX)
				return -1;
			if (lay_out(s, pt->kgc[q].child, order, norder))
				return -1;
		}
	s->v[r].index = *norder;
	order[(*norder)++] = r;
	return 0;
}

static void free_found(struct found *fo)
{
	struct bc_proto *pt = &fo->pt;

	for (int q = 0; pt->kgc && q < pt->nkgc; q++)
		if (pt->kgc[q].type == BC_KGC_STR)
			free((char *)pt->kgc[q].str);
	free(pt->ins), free(pt->line), free(pt->uv), free(pt->uvname), free(pt->kgc);
	free(fo->name);
}

int check__process(pid_t pid, const struct check_ctx *c, const struct lj_layout *lj,
		   struct check_result *r, char *err, size_t errsz)
{
	static const char *const jnames[] = { "FORI", "FORL", "ITERL", "LOOP", "JMP", "JFORI", "JFORL",
					      "IFORL", "JITERL", "IITERL", "JLOOP", "ILOOP" };
	static const char *const knames[] = { "GGET", "GSET", "KSTR", "TGETS", "TSETS", "FNEW" };
	static const char *const hnames[] = { "FUNCF", "IFUNCF", "JFUNCF", "FUNCV", "IFUNCV", "JFUNCV" };
	struct scan s = { .pid = pid, .lj = lj, .b = c->b };
	int jop[12], kop[12], *order = NULL, ret = -1;

	for (int i = 0; i < 12; i++)
		jop[i] = op_named(c->b, jnames[i]);
	for (int i = 0; i < 6; i++) {
		kop[2 * i] = op_named(c->b, knames[i]);
		kop[2 * i + 1] = i == 3 || i == 4;	/* TGETS, TSETS: the key is C */
		s.hdr[i] = op_named(c->b, hnames[i]);
	}
	scan_memory(&s);
	if (!s.n) {
		snprintf(err, errsz, "process %d: no Lua function found in its memory", pid);
		goto out;
	}
	qsort(s.v, s.n, sizeof(*s.v), by_addr);
	for (int i = 0; i < s.n; i++)
		if (read_proto(&s, i, jop, kop, 6))
			s.v[i].pt.nins = 0;	/* unreadable now (freed meanwhile): nothing to say */
	order = malloc(s.n * sizeof(*order));
	if (!order)
		goto out;
	for (int root = 0; root < s.n; root++) {
		struct bc_chunk ch = { 0 };
		int n = 0;
		const char *name;

		if (s.v[root].parent >= 0 || !s.v[root].name)
			continue;
		if (lay_out(&s, root, order, &n))
			continue;
		ch.nprotos = n;
		ch.protos = calloc(n, sizeof(*ch.protos));
		if (!ch.protos)
			goto out;
		for (int q = 0; q < n; q++) {
			struct bc_proto *pt = &ch.protos[q];

			*pt = s.v[order[q]].pt;
			pt->parent = s.v[order[q]].parent >= 0 ? s.v[s.v[order[q]].parent].index : -1;
			/* CHILD constants: scan index -> chunk index, in a copy */
			pt->kgc = malloc((pt->nkgc + 1) * sizeof(*pt->kgc));
			if (!pt->kgc)
				goto out;
			memcpy(pt->kgc, s.v[order[q]].pt.kgc, (pt->nkgc + 1) * sizeof(*pt->kgc));
			for (int k = 0; k < pt->nkgc; k++) {
				int child = pt->kgc[k].child;

				/* Two parents of one name (a stale copy of the
				 * chunk) claimed it: only the one it joined keeps it. */
				if (pt->kgc[k].type == BC_KGC_CHILD && s.v[child].parent != order[q])
					pt->kgc[k].type = BC_KGC_TAB;
				else if (pt->kgc[k].type == BC_KGC_CHILD)
					pt->kgc[k].child = s.v[child].index;
			}
		}
		ch.name = s.v[root].name;
		ch.fr2 = 1;	/* the layouts nupp-bpf reads are GC64's */
		name = ch.name[0] == '@' || ch.name[0] == '=' ? ch.name + 1 : ch.name;
		if (check__chunk(c, &ch, name, r)) {
			snprintf(err, errsz, "out of memory");
			for (int q = 0; q < n; q++)
				free(ch.protos[q].kgc);
			free(ch.protos);
			goto out;
		}
		for (int q = 0; q < n; q++)
			free(ch.protos[q].kgc);
		free(ch.protos);
	}
	ret = 0;
out:
	for (int i = 0; i < s.n; i++)
		free_found(&s.v[i]);
	free(s.v);
	free(order);
	return ret;
}
