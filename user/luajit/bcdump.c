// SPDX-License-Identifier: MIT
/*
 * bcdump.c - LuaJIT bytecode dumps read back into prototypes (bcdump.h).
 *
 * Mirrors lj_bcread.c. Every length is checked against the end of the
 * dump: a dump is data from another process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bcdump.h"

#define BCDUMP_F_BE	0x01
#define BCDUMP_F_STRIP	0x02
#define BCDUMP_F_FR2	0x08
#define BCDUMP_F_KNOWN	0x0f

struct reader {
	const __u8 *p, *end;
	int bad;
};

static __u32 uleb(struct reader *r)
{
	__u32 v = 0;
	int sh = 0;

	do {
		if (r->p >= r->end || sh > 28) {
			r->bad = 1;
			return 0;
		}
		v |= (__u32)(*r->p & 0x7f) << sh;
		sh += 7;
	} while (*r->p++ & 0x80);
	return v;
}

static const __u8 *take(struct reader *r, size_t n)
{
	const __u8 *p = r->p;

	if ((size_t)(r->end - r->p) < n) {
		r->bad = 1;
		return NULL;
	}
	r->p += n;
	return p;
}

/* A number constant: lj_bcread.c bcread_knum (33-bit ULEB, then the high word). */
static void skip_knum(struct reader *r)
{
	const __u8 *p = take(r, 1);

	if (!p)
		return;
	if (*p >= 0x80)
		for (const __u8 *q; (q = take(r, 1)) && (*q & 0x80);)
			;
	if (*p & 1)
		uleb(r);
}

/* A template table's key or value (bcread_ktabk). */
static void skip_ktabk(struct reader *r)
{
	__u32 tp = uleb(r);

	if (tp >= 5)
		take(r, tp - 5);
	else if (tp == 3)
		uleb(r);
	else if (tp == 4)
		uleb(r), uleb(r);
}

/* The strings block: every string of the dump fits in its length. */
static char *put_str(char **w, const __u8 *s, size_t n)
{
	char *out = *w;

	memcpy(out, s, n);
	out[n] = 0;
	*w += n + 1;
	return out;
}

static int read_proto(struct reader *r, struct bc_chunk *c, int *stack, int *nstack, int strip,
		      char **w, char *err, size_t errsz)
{
	struct bc_proto *pt = &c->protos[c->nprotos];
	__u32 sizedbg = 0, sizekn, nins, nkgc;
	const __u8 *p;
	int i;

	memset(pt, 0, sizeof(*pt));
	pt->parent = -1;
	if (!(p = take(r, 4)))
		goto bad;
	pt->flags = p[0], pt->numparams = p[1], pt->framesize = p[2], pt->nuv = p[3];
	nkgc = uleb(r);
	sizekn = uleb(r);
	nins = uleb(r);
	if (!strip) {
		sizedbg = uleb(r);
		if (sizedbg) {
			pt->firstline = uleb(r);
			pt->numline = uleb(r);
		}
	}
	/* Each instruction is 4 bytes of the dump, each constant at least 1. */
	if (r->bad || nins > (__u32)(r->end - r->p) / 4 || nkgc > (__u32)(r->end - r->p))
		goto bad;
	pt->nins = (int)nins, pt->nkgc = (int)nkgc;
	pt->ins = calloc(pt->nins + 1, sizeof(*pt->ins));
	pt->line = calloc(pt->nins + 1, sizeof(*pt->line));
	pt->uv = calloc(pt->nuv + 1, sizeof(*pt->uv));
	pt->uvname = calloc(pt->nuv + 1, sizeof(*pt->uvname));
	pt->kgc = calloc(pt->nkgc + 1, sizeof(*pt->kgc));
	if (!pt->ins || !pt->line || !pt->uv || !pt->uvname || !pt->kgc || !(p = take(r, pt->nins * 4ul)))
		goto bad;
	memcpy(pt->ins, p, pt->nins * 4ul);
	if (!(p = take(r, pt->nuv * 2ul)))
		goto bad;
	memcpy(pt->uv, p, pt->nuv * 2ul);
	for (i = 0; i < pt->nkgc && !r->bad; i++) {
		struct bc_kgc *k = &pt->kgc[i];
		__u32 tp = uleb(r);

		if (tp >= BC_KGC_STR) {
			k->type = BC_KGC_STR;
			k->len = tp - BC_KGC_STR;
			if (!(p = take(r, k->len)))
				goto bad;
			k->str = put_str(w, p, k->len);
		} else if (tp == BC_KGC_CHILD) {
			k->type = BC_KGC_CHILD;
			if (*nstack == 0)
				goto bad;
			k->child = stack[--*nstack];
			c->protos[k->child].parent = c->nprotos;
		} else if (tp == BC_KGC_TAB) {
			__u32 na = uleb(r), nh = uleb(r);

			k->type = BC_KGC_TAB;
			for (__u32 j = 0; j < na && !r->bad; j++)
				skip_ktabk(r);
			for (__u32 j = 0; j < 2 * nh && !r->bad; j++)
				skip_ktabk(r);
		} else {
			k->type = tp;
			for (int j = tp == BC_KGC_COMPLEX ? 4 : 2; j--;)
				uleb(r);
		}
	}
	for (__u32 n = 0; n < sizekn && !r->bad; n++)
		skip_knum(r);
	if (r->bad)
		goto bad;
	return 0;
bad:
	snprintf(err, errsz, "truncated or malformed prototype %d", c->nprotos);
	return -1;
}

int bcdump__parse(const void *data, size_t len, struct bc_chunk *c, char *err, size_t errsz)
{
	struct reader r = { data, (const __u8 *)data + len, 0 };
	int strip, cap = 16, *stack = NULL, nstack = 0;
	const __u8 *p;
	__u32 flags;
	char *w;

	memset(c, 0, sizeof(*c));
	if (!(p = take(&r, 4)) || p[0] != 0x1b || p[1] != 'L' || p[2] != 'J') {
		snprintf(err, errsz, "not a LuaJIT bytecode dump");
		return -1;
	}
	if (p[3] != 2) {
		snprintf(err, errsz, "bytecode dump version %d (LuaJIT 2.1 writes 2)", p[3]);
		return -1;
	}
	flags = uleb(&r);
	if (flags & ~BCDUMP_F_KNOWN || flags & BCDUMP_F_BE) {
		snprintf(err, errsz, "bytecode dump flags 0x%x not understood", flags);
		return -1;
	}
	strip = !!(flags & BCDUMP_F_STRIP);
	c->fr2 = !!(flags & BCDUMP_F_FR2);
	/* Strings are copied into one block no larger than the dump. */
	c->strings = w = malloc(len + 1);
	c->protos = calloc(cap + 1, sizeof(*c->protos));	/* + the one being read */
	stack = calloc(cap, sizeof(*stack));
	if (!c->strings || !c->protos || !stack)
		goto oom;
	c->name = put_str(&w, (const __u8 *)"", 0);
	if (!strip) {
		__u32 n = uleb(&r);

		if (!(p = take(&r, n)))
			goto bad;
		c->name = put_str(&w, p, n);
	}
	for (;;) {
		__u32 n = uleb(&r);
		const __u8 *end;
		struct reader body;

		if (r.bad)
			goto bad;
		if (n == 0)
			break;
		if (!(p = take(&r, n)))
			goto bad;
		end = p + n;
		body = (struct reader){ p, end, 0 };
		if (c->nprotos == cap) {
			void *np = realloc(c->protos, (2 * cap + 1) * sizeof(*c->protos));
			void *ns = realloc(stack, 2 * cap * sizeof(*stack));

			if (np)
				c->protos = np;
			if (ns)
				stack = ns;
			if (!np || !ns)
				goto oom;
			memset(c->protos + cap + 1, 0, cap * sizeof(*c->protos));
			cap *= 2;
		}
		if (read_proto(&body, c, stack, &nstack, strip, &w, err, errsz))
			goto fail;
		/* The debug info: line numbers, then upvalue names. */
		{
			struct bc_proto *pt = &c->protos[c->nprotos];
			int sz = pt->numline < 256 ? 1 : pt->numline < 65536 ? 2 : 4;

			for (int i = 0; i < pt->nins; i++)
				pt->line[i] = pt->firstline;
			if (!strip && body.p < end) {
				const __u8 *li = take(&body, (size_t)sz * pt->nins);

				for (int i = 0; li && i < pt->nins; i++) {
					__u32 d = sz == 1 ? li[i] : sz == 2 ? (__u32)li[2 * i] | li[2 * i + 1] << 8 :
						  (__u32)li[4 * i] | li[4 * i + 1] << 8 | li[4 * i + 2] << 16 |
						  (__u32)li[4 * i + 3] << 24;
					pt->line[i] = pt->firstline + (int)d;
				}
			}
			for (int i = 0; i < pt->nuv; i++) {
				const __u8 *s = body.p, *z = s < end ? memchr(s, 0, end - s) : NULL;

				pt->uvname[i] = put_str(&w, s, z ? (size_t)(z - s) : 0);
				body.p = z ? z + 1 : end;
			}
			if (body.bad)
				goto bad;
		}
		stack[nstack++] = c->nprotos++;
	}
	if (c->nprotos == 0 || nstack != 1)
		goto bad;
	free(stack);
	return 0;
bad:
	snprintf(err, errsz, "truncated or malformed bytecode dump");
	goto fail;
oom:
	snprintf(err, errsz, "out of memory");
fail:
	free(stack);
	bcdump__free(c);
	return -1;
}

void bcdump__free(struct bc_chunk *c)
{
	for (int i = 0; c->protos && i <= c->nprotos; i++) {
		struct bc_proto *pt = &c->protos[i];

		free(pt->ins), free(pt->line), free(pt->uv), free(pt->uvname), free(pt->kgc);
	}
	free(c->protos);
	free(c->strings);
	memset(c, 0, sizeof(*c));
}
