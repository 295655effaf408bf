// SPDX-License-Identifier: MIT
/* paths.c - how an object of a LuaJIT heap is reached from a root (paths.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "paths.h"
#include "objects.h"
#include "base/keymap.h"
#include "base/util.h"

/* GC64 type tags of a TValue ((s64)tv >> 47, lj_obj.h); an object's own
 * tag (gch.gct) is LJ_GCT_* of bpf/lj_layout.h. */
#define IT_NIL		0xffffffffU
#define IT_FALSE	0xfffffffeU
#define IT_TRUE		0xfffffffdU
#define IT_STR		0xfffffffbU
#define IT_CDATA	0xfffffff5U
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

#define COLLECTION	64		/* a table of more slots is a collection: its
					 * entries make one group, "[*]" */
#define GROUPS_MAX	(1U << 20)	/* past this, an object joins its parent's */

struct seen {
	__u64 addr;		/* 0: free */
	__u64 parent;		/* 0 for a root */
	__u64 via;
	__u64 bytes;		/* its own, as the collector counts them */
	__u32 slots;		/* a table's array and hash slots */
	__u32 group;		/* its path's group (refs__groups) */
};

/* A string or cdata reached: it refers to nothing, and there are millions
 * of them. Kept apart from the containers' table, seen by a bit per 8
 * bytes of the copy, and grouped after the walk under its container. */
struct leaf {
	__u64 parent;		/* the container it was reached from */
	__u64 via;
	__u64 bytes;
};

struct refs {
	struct heapmem *m;
	const struct lj_layout *lj;
	__u64 GG;
	struct seen *tab;	/* the containers (and leaves outside the copy),
				 * open addressing, by address */
	size_t cap, used, first_cap;
	__u64 *queue;		/* every object in tab, in the order reached */
	size_t qhead, qlen, qcap;
	__u64 **marks;		/* by region of the copy: a bit per 8 bytes, a leaf seen */
	struct leaf *leaves;	/* in the order reached */
	size_t nleaves, leafcap;
};

static size_t slot_of(const struct refs *r, __u64 addr)
{
	size_t i = (size_t)((addr >> 3) * 0x9e3779b97f4a7c15ULL) & (r->cap - 1);

	while (r->tab[i].addr && r->tab[i].addr != addr)
		i = (i + 1) & (r->cap - 1);
	return i;
}

/* A table of cap entries, zeroed, its pages mapped writable at once: a
 * probe reads a fresh page before it writes, and calloc's fresh pages are
 * then the zero page, whose first write costs a fault and a TLB flush on
 * every CPU (a third of a census's time, measured). */
static void *zeroed(size_t bytes);

static struct seen *table_alloc(size_t cap)
{
	return zeroed(cap * sizeof(struct seen));
}

static void table_free(struct seen *tab, size_t cap)
{
	if (tab)
		munmap(tab, cap * sizeof(*tab));
}

static int grow(struct refs *r)
{
	struct seen *old = r->tab;
	size_t oldcap = r->cap;

	r->cap = oldcap ? 2 * oldcap : r->first_cap;
	r->tab = table_alloc(r->cap);
	if (!r->tab) {
		r->tab = old;
		r->cap = oldcap;
		return -1;
	}
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].addr)
			r->tab[slot_of(r, old[i].addr)] = old[i];
	table_free(old, oldcap);
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
	r->tab[i] = (struct seen){ .addr = obj, .parent = parent, .via = via };
	r->used++;
	if (ARRAY_ROOM(r->queue, r->qlen, r->qcap, 4096))
		return -1;
	r->queue[r->qlen++] = obj;
	return 0;
}

/* Pages mapped writable at once (table_alloc says why), zeroed. */
static void *zeroed(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Leaf obj (a string or cdata, tag gct) reached from parent by via: weighed
 * and kept once. One outside the copy goes to the table as a container
 * would (visit weighs it). 0, or -1 out of memory. */
static int reach_leaf(struct refs *r, __u64 obj, __u64 parent, __u64 via, __u8 gct)
{
	const struct heapmem *m = r->m;
	const unsigned char *h;
	__u64 *bits, bytes = 0;
	enum heap_type type;
	size_t bit;
	long i;

	if (!obj || (obj & 7))
		return 0;
	if ((i = heapmem__region(m, obj)) < 0 || !r->marks)
		return reach(r, obj, parent, via);
	if (!r->marks[i] && !(r->marks[i] = zeroed((m->r[i].hi - m->r[i].lo) / 64 + 8)))
		return -1;
	bits = r->marks[i];
	bit = (obj - m->r[i].lo) / 8;
	if (bits[bit / 64] & (1ULL << (bit % 64)))
		return 0;
	bits[bit / 64] |= 1ULL << (bit % 64);
	/* A string's header or a cdata's, whole in the copy, of the tag its
	 * reference says (else the heap changed: it weighs nothing here). */
	if ((h = heapmem__view(m, obj, r->lj->str_size > 16 ? r->lj->str_size : 16)) &&
	    h[r->lj->gc_gct] == gct && heap_object__weigh(r->lj, r->GG, obj, h, &type, &bytes))
		bytes = 0;
	if (ARRAY_ROOM(r->leaves, r->nleaves, r->leafcap, 4096))
		return -1;
	r->leaves[r->nleaves++] = (struct leaf){ parent, via, bytes };
	return 0;
}

/* A TValue that refers to an object: queue it; a string or cdata (which
 * refer to none) weighed and kept. */
static int reach_tv(struct refs *r, __u64 tv, __u64 parent, __u64 via)
{
	__u32 it = (__u32)((__s64)tv >> 47);

	if (it == IT_TAB || it == IT_FUNC || it == IT_THREAD || it == IT_UDATA)
		return reach(r, tv & LJ_GCVMASK, parent, via);
	if (it == IT_STR || it == IT_CDATA)
		return reach_leaf(r, tv & LJ_GCVMASK, parent, via,
				  it == IT_STR ? LJ_GCT_STR : LJ_GCT_CDATA);
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

/* obj weighed, and the objects it refers to queued. */
static int visit(struct refs *r, __u64 obj)
{
	const struct lj_layout *lj = r->lj;
	unsigned char buf[1024];
	const unsigned char *h;
	__u32 hlen = heap_object__header_len(lj);
	struct seen *me;
	enum heap_type type;
	__u64 uv, v;

	/* The header in the copy; or as much of it as the object's mapping
	 * holds, read. */
	if (!(h = heapmem__view(r->m, obj, hlen))) {
		memset(buf, 0, sizeof(buf));	/* what a short read leaves out reads 0 */
		if (hlen > sizeof(buf) || (heapmem__read(r->m, buf, hlen, obj) &&
					   heapmem__read(r->m, buf, 64, obj) &&
					   heapmem__read(r->m, buf, lj->str_size, obj)))
			return 0;
		h = buf;
	}
	me = &r->tab[slot_of(r, obj)];
	if (heap_object__weigh(lj, r->GG, obj, h, &type, &me->bytes))
		me->bytes = 0;		/* it changed: weighs nothing here */
	else if (type == HEAP_TABLE)
		me->slots = load_u32(h, lj->tab_asize) + load_u32(h, lj->tab_hmask) + 1;
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

struct refs *refs__walk(struct heapmem *m, const struct lj_layout *lj, __u64 g, size_t expect)
{
	struct refs *r = calloc(1, sizeof(*r));
	__u64 GG = g - lj->gg_g, env = 0, reg = 0;

	/* Sized once for what the census counted: growing rehashes it all. */
	if (r)
		for (r->first_cap = 1 << 16; r->first_cap < 2 * expect && r->first_cap < (1ULL << 40);)
			r->first_cap *= 2;
	if (!r || grow(r)) {
		free(r);
		return NULL;
	}
	r->m = m;
	r->lj = lj;
	r->GG = GG;
	r->marks = m->n ? calloc(m->n, sizeof(*r->marks)) : NULL;	/* none: all in tab */
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


/* segs[k-1]..segs[0] (root first) joined into out; the registry's _LOADED
 * is package.loaded. */
static void join(char segs[][64], int k, bool cut, char *out, size_t n)
{
	size_t len = 0;

	out[0] = '\0';
	if (cut)
		len = (size_t)snprintf(out, n, "...");
	while (k-- > 0 && len < n)
		len += (size_t)snprintf(out + len, n - len, "%s", segs[k]);
	if (!strncmp(out, "registry._LOADED", 16) && (out[16] == '.' || out[16] == '[' || !out[16])) {
		memmove(out + 14, out + 16, strlen(out + 16) + 1);
		memcpy(out, "package.loaded", 14);
	}
}

int refs__path(struct refs *r, __u64 obj, char *out, size_t n)
{
	char seg[PATH_DEPTH_MAX][64];
	int k = 0;
	size_t i;

	for (__u64 o = obj; o && k < PATH_DEPTH_MAX; k++) {
		i = slot_of(r, o);
		if (!r->tab[i].addr)
			return -1;
		segment(r, r->tab[i].via, seg[k], sizeof(seg[k]));
		o = r->tab[i].parent;
	}
	join(seg, k, k == PATH_DEPTH_MAX, out, n);
	return 0;
}

/* The segment of the path of an object reached from parent (its entry,
 * NULL for a root) by via that names its group: the entries of a
 * collection (and every array slot) are one, "[*]". */
static void group_segment(struct refs *r, const struct seen *parent, __u64 via, char *out,
			  size_t n)
{
	enum via kind = VIA_KIND(via);

	if (kind == VIA_ARRAY || (kind == VIA_HASH && parent && parent->slots > COLLECTION))
		snprintf(out, n, "[*]");
	else
		segment(r, via, out, n);
}

struct group_key {
	__u32 parent;
	char seg[44];
};

/* The groups being made: their index by key, and the last "[*]" group
 * made or found (a collection's entries come one after another). */
struct grouping {
	struct keymap ids;
	__u32 star_parent;
	long star;
};

/* The group of an object reached from parent (NULL: a root) by via,
 * made when new; its index, or -1 out of memory. */
static long group_of(struct refs *r, struct grouping *gr, struct path_groups *pg,
		     const struct seen *from, __u64 via)
{
	__u32 parent = from ? from->group : PATH_ROOT;
	struct group_key key = { .parent = parent };
	enum via kind = VIA_KIND(via);
	bool star = kind == VIA_ARRAY || (kind == VIA_HASH && from && from->slots > COLLECTION);
	char seg[64];
	long id;

	if (star && gr->star >= 0 && gr->star_parent == parent)
		return gr->star;
	group_segment(r, from, via, seg, sizeof(seg));
		/* Zero-padded, as keys compare whole; a long one cut. */
		for (size_t c = 0; c < sizeof(key.seg) - 1 && seg[c]; c++)
			key.seg[c] = seg[c];
	id = keymap__get(&gr->ids, &key, sizeof(key));
	/* Past the groups' limit, or below the deepest path written (a long
	 * chain, a.next.next...), an object is its parent's. */
	if (id < 0 && parent != PATH_ROOT &&
	    (pg->n >= GROUPS_MAX || pg->g[parent].depth + 1 >= PATH_DEPTH_MAX)) {
		id = parent;
	} else if (id < 0) {
		if (ARRAY_ROOM(pg->g, pg->n, pg->cap, 1024) ||
		    keymap__put(&gr->ids, &key, sizeof(key), (long)pg->n))
			return -1;
		id = (long)pg->n++;
		pg->g[id] = (struct path_group){
			.parent = parent,
			.depth = parent == PATH_ROOT ? 1 : pg->g[parent].depth + 1 };
		memcpy(pg->g[id].seg, key.seg, sizeof(key.seg));
	}
	if (star) {
		gr->star_parent = parent;
		gr->star = id;
	}
	return id;
}

int refs__groups(struct refs *r, struct path_groups *pg)
{
	struct grouping gr = { .star = -1 };
	const struct seen *from = NULL;
	__u64 from_addr = 0;
	int ret = -1;
	long id;

	/* The containers in the order reached: a parent before its children.
	 * Siblings come together: their parent is looked up once for them. */
	for (size_t q = 0; q < r->qlen; q++) {
		struct seen *o = &r->tab[slot_of(r, r->queue[q])];

		if (o->parent != from_addr || !from)
			from = (from_addr = o->parent) ? &r->tab[slot_of(r, from_addr)] : NULL;
		if ((id = group_of(r, &gr, pg, from, o->via)) < 0)
			goto out;
		o->group = (__u32)id;
		pg->g[id].objects++;
		pg->g[id].bytes += o->bytes;
	}
	from = NULL;
	for (size_t i = 0; i < r->nleaves; i++) {
		const struct leaf *l = &r->leaves[i];

		if (l->parent != from_addr || !from)
			from = (from_addr = l->parent) ? &r->tab[slot_of(r, from_addr)] : NULL;
		if ((id = group_of(r, &gr, pg, from, l->via)) < 0)
			goto out;
		pg->g[id].objects++;
		pg->g[id].bytes += l->bytes;
	}
	/* A group is made after its parent's: children first, upwards. */
	for (size_t i = pg->n; i-- > 0;) {
		struct path_group *g = &pg->g[i];

		g->retained += g->bytes;
		g->retained_objects += g->objects;
		if (g->parent != PATH_ROOT) {
			pg->g[g->parent].retained += g->retained;
			pg->g[g->parent].retained_objects += g->retained_objects;
		}
	}
	ret = 0;
out:
	keymap__free(&gr.ids);
	return ret;
}

void path_groups__text(const struct path_groups *pg, size_t i, char *out, size_t n)
{
	char seg[PATH_DEPTH_MAX][64];
	int k = 0;

	for (__u32 g = (__u32)i; g != PATH_ROOT && k < PATH_DEPTH_MAX; g = pg->g[g].parent)
		snprintf(seg[k++], sizeof(seg[0]), "%s", pg->g[g].seg);
	join(seg, k, k == PATH_DEPTH_MAX, out, n);
}

void path_groups__free(struct path_groups *pg)
{
	free(pg->g);
	*pg = (struct path_groups){};
}

size_t refs__reached(const struct refs *r)
{
	return r->used + r->nleaves;
}

void refs__free(struct refs *r)
{
	if (!r)
		return;
	table_free(r->tab, r->cap);
	free(r->queue);
	for (size_t i = 0; r->marks && i < r->m->n; i++)
		if (r->marks[i])
			munmap(r->marks[i], (r->m->r[i].hi - r->m->r[i].lo) / 64 + 8);
	free(r->marks);
	free(r->leaves);
	free(r);
}
