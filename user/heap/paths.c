// SPDX-License-Identifier: MIT
/* paths.c - how an object of a LuaJIT heap is reached from a root (paths.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "paths.h"
#include "base/util.h"

/* GC64 type tags of a TValue ((s64)tv >> 47, lj_obj.h); an object's own
 * tag (gch.gct) is LJ_GCT_* of bpf/lj_layout.h. */
#define IT_NIL		0xffffffffU
#define IT_FALSE	0xfffffffeU
#define IT_TRUE		0xfffffffdU
#define IT_STR		0xfffffffbU
#define IT_THREAD	0xfffffff9U
#define IT_FUNC		0xfffffff7U
#define IT_TAB		0xfffffff4U
#define IT_UDATA	0xfffffff3U
#define IT_NUMX		0xfffeffffU	/* below: a double */

/* How an object was reached: a kind in the top byte, a detail below. */
enum via {
	VIA_G = 1, VIA_REGISTRY, VIA_MAIN,	/* roots */
	VIA_ARRAY,		/* detail: the slot */
	VIA_HASH,		/* detail: the Node's address (its key names it) */
	VIA_KEY,		/* a hash key itself; detail: the Node */
	VIA_META, VIA_ENV,
	VIA_UPVALUE,		/* detail: its number */
	VIA_STACK,		/* detail: the slot */
};
#define VIA(kind, detail)	((__u64)(kind) << 56 | ((detail) & ((1ULL << 56) - 1)))
#define VIA_KIND(v)		((enum via)((v) >> 56))
#define VIA_DETAIL(v)		((v) & ((1ULL << 56) - 1))

#define SLOTS_MAX	(1U << 28)	/* a larger part is no table */
#define BATCH		4096		/* TValues or Nodes read at once */

struct seen {
	__u64 addr;		/* 0: free */
	__u64 parent;		/* 0 for a root */
	__u64 via;
};

struct refs {
	struct heapmem *m;
	const struct lj_layout *lj;
	struct seen *tab;	/* open addressing, by address */
	size_t cap, used;
	__u64 *queue;
	size_t qhead, qlen, qcap;
};

static size_t slot_of(const struct refs *r, __u64 addr)
{
	size_t i = (size_t)((addr >> 3) * 0x9e3779b97f4a7c15ULL) & (r->cap - 1);

	while (r->tab[i].addr && r->tab[i].addr != addr)
		i = (i + 1) & (r->cap - 1);
	return i;
}

static int grow(struct refs *r)
{
	struct seen *old = r->tab;
	size_t oldcap = r->cap;

	r->cap = oldcap ? 2 * oldcap : 1 << 16;
	r->tab = calloc(r->cap, sizeof(*r->tab));
	if (!r->tab) {
		r->tab = old;
		r->cap = oldcap;
		return -1;
	}
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].addr)
			r->tab[slot_of(r, old[i].addr)] = old[i];
	free(old);
	return 0;
}

/* Note obj as reached from parent by via, and queue it, unless it was
 * reached before. 0, or -1 out of memory. */
static int reach(struct refs *r, __u64 obj, __u64 parent, __u64 via)
{
	size_t i;

	if (!obj || (obj & 7))
		return 0;
	if ((r->used + 1) * 2 > r->cap && grow(r))
		return -1;
	i = slot_of(r, obj);
	if (r->tab[i].addr)
		return 0;
	r->tab[i] = (struct seen){ obj, parent, via };
	r->used++;
	if (ARRAY_ROOM(r->queue, r->qlen, r->qcap, 4096))
		return -1;
	r->queue[r->qlen++] = obj;
	return 0;
}

/* A TValue that refers to an object that refers to others: queue it. */
static int reach_tv(struct refs *r, __u64 tv, __u64 parent, __u64 via)
{
	__u32 it = (__u32)((__s64)tv >> 47);

	if (it == IT_TAB || it == IT_FUNC || it == IT_THREAD || it == IT_UDATA)
		return reach(r, tv & LJ_GCVMASK, parent, via);
	return 0;
}

/* n TValues at addr, each reached as via(kind, its index). */
static int reach_slots(struct refs *r, __u64 addr, __u64 n, __u64 parent, enum via kind)
{
	__u64 tv[BATCH];

	for (__u64 i = 0; i < n; i += BATCH) {
		__u64 k = n - i < BATCH ? n - i : BATCH;

		if (heapmem__read(r->m, tv, 8 * k, addr + 8 * i))
			return 0;	/* unreadable: what it refers to stays unreached */
		for (__u64 j = 0; j < k; j++)
			if (reach_tv(r, tv[j], parent, VIA(kind, i + j)))
				return -1;
	}
	return 0;
}

static int reach_table(struct refs *r, __u64 t, const unsigned char *h)
{
	const struct lj_layout *lj = r->lj;
	__u32 asize = load_u32(h, lj->tab_asize), hmask = load_u32(h, lj->tab_hmask);
	__u64 node = load_u64(h, lj->tab_node) & LJ_GCVMASK;
	unsigned char nodes[BATCH * 32];
	__u32 per = lj->node_size ? sizeof(nodes) / lj->node_size : 0;

	if (reach(r, load_u64(h, lj->tab_metatable) & LJ_GCVMASK, t, VIA(VIA_META, 0)))
		return -1;
	if (asize && asize < SLOTS_MAX &&
	    reach_slots(r, load_u64(h, lj->tab_array) & LJ_GCVMASK, asize, t, VIA_ARRAY))
		return -1;
	if (!hmask || hmask >= SLOTS_MAX || !per || lj->node_size > 32)
		return 0;
	for (__u64 i = 0; i <= hmask; i += per) {
		__u64 k = hmask + 1 - i < per ? hmask + 1 - i : per;

		if (heapmem__read(r->m, nodes, k * lj->node_size, node + i * lj->node_size))
			return 0;
		for (__u64 j = 0; j < k; j++) {
			const unsigned char *n = nodes + j * lj->node_size;
			__u64 at = node + (i + j) * lj->node_size;

			if (reach_tv(r, load_u64(n, lj->node_val), t, VIA(VIA_HASH, at)) ||
			    reach_tv(r, load_u64(n, lj->node_key), t, VIA(VIA_KEY, at)))
				return -1;
		}
	}
	return 0;
}

/* The objects obj refers to, queued. */
static int visit(struct refs *r, __u64 obj)
{
	const struct lj_layout *lj = r->lj;
	unsigned char h[512];
	__u64 uv, v;

	if (heapmem__read(r->m, h, lj->tab_size > 64 ? lj->tab_size : 64, obj) &&
	    heapmem__read(r->m, h, 64, obj))
		return 0;
	switch (h[lj->gc_gct]) {
	case LJ_GCT_TAB:
		return reach_table(r, obj, h);
	case LJ_GCT_FUNC:
		if (reach(r, load_u64(h, lj->fn_env) & LJ_GCVMASK, obj, VIA(VIA_ENV, 0)))
			return -1;
		if (h[lj->fn_ffid] != 0)
			return 0;
		for (__u32 i = 0; i < h[lj->fn_nupvalues]; i++) {
			/* uvptr[i] -> GCupval, whose v points at its value */
			if (heapmem__read(r->m, &uv, 8, obj + lj->fnl_uvptr + 8 * i) ||
			    heapmem__read(r->m, &v, 8, (uv & LJ_GCVMASK) + lj->uv_v) ||
			    heapmem__read(r->m, &v, 8, v & LJ_GCVMASK))
				continue;
			if (reach_tv(r, v, obj, VIA(VIA_UPVALUE, i)))
				return -1;
		}
		return 0;
	case LJ_GCT_THREAD:
		if (reach(r, load_u64(h, lj->L_env) & LJ_GCVMASK, obj, VIA(VIA_ENV, 0)))
			return -1;
		v = load_u64(h, lj->L_stack) & LJ_GCVMASK;
		uv = load_u64(h, lj->L_top) & LJ_GCVMASK;
		return uv > v && uv - v < 8ULL * SLOTS_MAX ?
		       reach_slots(r, v, (uv - v) / 8, obj, VIA_STACK) : 0;
	case LJ_GCT_UDATA:
		return reach(r, load_u64(h, lj->ud_metatable) & LJ_GCVMASK, obj, VIA(VIA_META, 0)) ||
		       reach(r, load_u64(h, lj->ud_env) & LJ_GCVMASK, obj, VIA(VIA_ENV, 0)) ? -1 : 0;
	default:
		return 0;
	}
}

struct refs *refs__walk(struct heapmem *m, const struct lj_layout *lj, __u64 g)
{
	struct refs *r = calloc(1, sizeof(*r));
	__u64 GG = g - lj->gg_g, env = 0, reg = 0;

	if (!r || grow(r)) {
		free(r);
		return NULL;
	}
	r->m = m;
	r->lj = lj;
	/* The roots whose paths are preferred first: the globals (the main
	 * thread's environment) and the registry, which hold what lives on;
	 * then the main thread's stack (the locals of what runs now), for
	 * what those do not reach. */
	heapmem__read(m, &env, 8, GG + lj->L_env);
	heapmem__read(m, &reg, 8, g + lj->g_registrytv);
	if (reach(r, env & LJ_GCVMASK, 0, VIA(VIA_G, 0)) ||
	    reach_tv(r, reg, 0, VIA(VIA_REGISTRY, 0)))
		goto oom;
	for (int phase = 0; phase < 2; phase++) {
		if (phase && reach(r, GG, 0, VIA(VIA_MAIN, 0)))
			goto oom;
		while (r->qhead < r->qlen)
			if (visit(r, r->queue[r->qhead++]))
				goto oom;
	}
	free(r->queue);
	r->queue = NULL;
	return r;
oom:
	refs__free(r);
	return NULL;
}

/* A hash key as a path segment: .name, ["text"], [number], [true]... */
static void key_text(struct refs *r, __u64 node, char *out, size_t n)
{
	const struct lj_layout *lj = r->lj;
	__u64 key = 0;
	__u32 it, len = 0;
	char s[40];
	double d;
	bool ident = true;

	if (heapmem__read(r->m, &key, 8, node + lj->node_key)) {
		snprintf(out, n, "[?]");
		return;
	}
	it = (__u32)((__s64)key >> 47);
	if (it == IT_STR) {
		__u64 str = key & LJ_GCVMASK;

		if (heapmem__read(r->m, &len, 4, str + lj->str_len))
			len = 0;
		if (len > sizeof(s) - 1)
			len = sizeof(s) - 1;
		if (heapmem__read(r->m, s, len, str + lj->str_size))
			len = 0;
		s[len] = '\0';
		for (__u32 i = 0; i < len; i++)
			ident &= s[i] == '_' || ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z') ||
				 (i && s[i] >= '0' && s[i] <= '9');
		if (len && ident)
			snprintf(out, n, ".%s", s);
		else
			snprintf(out, n, "[\"%.*s\"]", (int)len, s);
	} else if (it < IT_NUMX) {
		memcpy(&d, &key, 8);
		snprintf(out, n, "[%.17g]", d);
	} else if (it == IT_TRUE || it == IT_FALSE) {
		snprintf(out, n, "[%s]", it == IT_TRUE ? "true" : "false");
	} else {
		snprintf(out, n, "[<%s>]", it == IT_TAB ? "table" : it == IT_FUNC ? "function" :
			 it == IT_UDATA ? "userdata" : "object");
	}
}

static void segment(struct refs *r, __u64 via, char *out, size_t n)
{
	switch (VIA_KIND(via)) {
	case VIA_G:		snprintf(out, n, "_G"); break;
	case VIA_REGISTRY:	snprintf(out, n, "registry"); break;
	case VIA_MAIN:		snprintf(out, n, "main thread"); break;
	case VIA_ARRAY:		snprintf(out, n, "[%llu]", (unsigned long long)VIA_DETAIL(via)); break;
	case VIA_HASH:		key_text(r, VIA_DETAIL(via), out, n); break;
	case VIA_KEY:		snprintf(out, n, ".<key>"); break;
	case VIA_META:		snprintf(out, n, ".<metatable>"); break;
	case VIA_ENV:		snprintf(out, n, ".<env>"); break;
	case VIA_UPVALUE:	snprintf(out, n, ".<upvalue %llu>", (unsigned long long)VIA_DETAIL(via) + 1); break;
	case VIA_STACK:		snprintf(out, n, ".stack[%llu]", (unsigned long long)VIA_DETAIL(via)); break;
	default:		snprintf(out, n, "?");
	}
}

int refs__path(struct refs *r, __u64 obj, char *out, size_t n)
{
	char seg[24][64];
	int k = 0;
	size_t i, len = 0;

	for (__u64 o = obj; o && k < 24; k++) {
		i = slot_of(r, o);
		if (!r->tab[i].addr)
			return -1;
		segment(r, r->tab[i].via, seg[k], sizeof(seg[k]));
		o = r->tab[i].parent;
	}
	out[0] = '\0';
	if (k == 24)
		len = (size_t)snprintf(out, n, "...");
	while (k-- > 0 && len < n)
		len += (size_t)snprintf(out + len, n - len, "%s", seg[k]);
	/* package.loaded is the registry's _LOADED */
	if (!strncmp(out, "registry._LOADED", 16) && (out[16] == '.' || out[16] == '[' || !out[16])) {
		memmove(out + 14, out + 16, strlen(out + 16) + 1);
		memcpy(out, "package.loaded", 14);
	}
	return 0;
}

size_t refs__reached(const struct refs *r)
{
	return r->used;
}

void refs__free(struct refs *r)
{
	if (!r)
		return;
	free(r->tab);
	free(r->queue);
	free(r);
}
