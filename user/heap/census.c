// SPDX-License-Identifier: MIT
/* census.c - what holds a LuaJIT heap (census.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "census.h"
#include "heapmem.h"
#include "paths.h"
#include "base/keymap.h"
#include "base/procmem.h"
#include "base/text.h"
#include "base/util.h"

/* Object type tags (gch.gct) are LJ_GCT_* of bpf/lj_layout.h. */

#define OBJECTS_MAX	(1ULL << 31)	/* a list longer than this is no heap: cut */
#define PREFIX_LEN	12		/* bytes of a string that make its prefix */

/* ---- the walk ------------------------------------------------------------ */

struct walk {
	const struct lj_layout *lj;
	struct heapmem mem;
	struct census *c;
	__u64 GG;			/* the main thread: its lua_State is in GG_State */
	struct keymap protos;		/* GCproto address -> index in pt */
	struct { __u64 addr, closures, bytes, closure; } *pt;
	size_t npt, ptcap;
	struct keymap prefixes;		/* a string's first bytes -> index in pre */
	struct { __u64 strings, bytes; char text[PREFIX_LEN + 1]; } *pre;
	size_t npre, precap;
};

/* Keep the CENSUS_TOP largest tables, largest first. */
static void rank_table(struct census *c, const struct census_table *t)
{
	int i = c->ntables < CENSUS_TOP ? c->ntables++ : CENSUS_TOP - 1;

	if (i == CENSUS_TOP - 1 && c->ntables == CENSUS_TOP && c->tables[i].bytes >= t->bytes)
		return;
	while (i > 0 && c->tables[i - 1].bytes < t->bytes) {
		c->tables[i] = c->tables[i - 1];
		i--;
	}
	c->tables[i] = *t;
}

static int proto_closure(struct walk *w, __u64 pt, __u64 fn, __u64 bytes)
{
	long i = keymap__get(&w->protos, &pt, sizeof(pt));

	if (i < 0) {
		if (ARRAY_ROOM(w->pt, w->npt, w->ptcap, 64) ||
		    keymap__put(&w->protos, &pt, sizeof(pt), (long)w->npt))
			return -1;
		i = (long)w->npt++;
		w->pt[i].addr = pt;
		w->pt[i].closure = fn;
		w->pt[i].closures = w->pt[i].bytes = 0;
	}
	w->pt[i].closures++;
	w->pt[i].bytes += bytes;
	return 0;
}

/* One object of the root list or the finalizer circle: its type and bytes
 * counted, a table ranked, a closure counted by prototype. 0, 1 when it did
 * not check, -1 out of memory. */
static int count_object(struct walk *w, __u64 o, const unsigned char *h)
{
	const struct lj_layout *lj = w->lj;
	enum heap_type type;
	__u64 bytes;

	if (h[lj->gc_gct] == LJ_GCT_STR ||	/* strings are on the string table's chains */
	    heap_object__weigh(lj, w->GG, o, h, &type, &bytes))
		return 1;
	if (type == HEAP_TABLE) {
		__u32 hmask = load_u32(h, lj->tab_hmask);

		rank_table(w->c, &(struct census_table){ .addr = o, .bytes = bytes,
							 .asize = load_u32(h, lj->tab_asize),
							 .hsize = hmask ? hmask + 1 : 0 });
	} else if (type == HEAP_LUA_FUNCTION &&
		   proto_closure(w, (load_u64(h, lj->fn_pc) & LJ_GCVMASK) - lj->pt_size, o, bytes)) {
		return -1;
	}
	w->c->type[type].objects++;
	w->c->type[type].bytes += bytes;
	return 0;
}

/* Walk a list from first through nextgc; stop at end (0, or the first
 * again for the finalizer circle). */
static int walk_list(struct walk *w, __u64 first, __u64 end)
{
	const struct lj_layout *lj = w->lj;
	unsigned char h[1024];
	const unsigned char *hp;
	__u32 hlen = heap_object__header_len(lj);
	__u64 o = first, steps = 0;

	if (hlen > sizeof(h))
		return -1;
	while (o && o != end) {
		int r;

		if ((o & 7) || ++steps > OBJECTS_MAX) {
			w->c->cut = true;
			return 0;
		}
		/* The header in the copy; or as much of it as the object's
		 * mapping holds, read. */
		if (!(hp = heapmem__view(&w->mem, o, hlen)) &&
		    heapmem__read(&w->mem, h, hlen, o) && heapmem__read(&w->mem, h, 64, o)) {
			w->c->unreadable++;
			w->c->cut = true;	/* its nextgc is lost with it */
			return 0;
		}
		if (!hp)
			hp = h;
		r = count_object(w, o, hp);
		if (r < 0)
			return -1;
		w->c->invalid += r;
		o = load_u64(hp, lj->gc_nextgc) & LJ_GCVMASK;
		if (!end && o == first)
			break;
	}
	return 0;
}

static int count_prefix(struct walk *w, const unsigned char *s, __u32 len, __u64 bytes)
{
	char key[PREFIX_LEN + 1];
	size_t n = 0;
	long i;

	while (n < PREFIX_LEN && n < len && s[n] >= 0x20 && s[n] < 0x7f)
		key[n] = (char)s[n], n++;
	key[n] = '\0';
	i = keymap__get(&w->prefixes, key, n + 1);
	if (i < 0) {
		if (ARRAY_ROOM(w->pre, w->npre, w->precap, 256) ||
		    keymap__put(&w->prefixes, key, n + 1, (long)w->npre))
			return -1;
		i = (long)w->npre++;
		memcpy(w->pre[i].text, key, n + 1);
		w->pre[i].strings = w->pre[i].bytes = 0;
	}
	w->pre[i].strings++;
	w->pre[i].bytes += bytes;
	return 0;
}

/* Every chain of the string table (lj_str.c: an entry's low bit marks a
 * chain hashed again; the strings link through nextgc). */
static int walk_strings(struct walk *w, __u64 g)
{
	const struct lj_layout *lj = w->lj;
	unsigned char h[256];
	__u64 tab, batch[512];
	__u32 mask;

	if (procmem__read(w->mem.pid, &tab, 8, g + lj->g_str_tab) ||
	    procmem__read(w->mem.pid, &mask, 4, g + lj->g_str_mask) || mask >= (1U << 30))
		return -1;
	tab &= LJ_GCVMASK;
	w->c->vm_bytes += 8ULL * ((__u64)mask + 1);
	for (__u64 i = 0; i <= mask; i += 512) {
		__u32 n = mask + 1 - i < 512 ? (__u32)(mask + 1 - i) : 512;

		if (heapmem__read(&w->mem, batch, 8ULL * n, tab + 8 * i) &&
		    procmem__read(w->mem.pid, batch, 8ULL * n, tab + 8 * i)) {
			w->c->cut = true;
			continue;
		}
		for (__u32 k = 0; k < n; k++) {
			__u64 o = batch[k] & LJ_GCVMASK & ~1ULL, steps = 0;

			while (o) {
				__u32 len, want = lj->str_size + PREFIX_LEN;
				enum heap_type type;
				__u64 bytes;

				if ((o & 7) || ++steps > OBJECTS_MAX ||
				    (heapmem__read(&w->mem, h, want, o) &&
				     heapmem__read(&w->mem, h, lj->str_size, o))) {
					w->c->unreadable++;
					w->c->cut = true;
					break;
				}
				if (h[lj->gc_gct] != LJ_GCT_STR ||
				    heap_object__weigh(lj, w->GG, o, h, &type, &bytes)) {
					w->c->invalid++;
					break;
				}
				len = load_u32(h, lj->str_len);
				w->c->type[HEAP_STRING].objects++;
				w->c->type[HEAP_STRING].bytes += bytes;
				if (count_prefix(w, h + lj->str_size,
						 len < PREFIX_LEN ? len : PREFIX_LEN, bytes))
					return -1;
				o = load_u64(h, lj->gc_nextgc) & LJ_GCVMASK;
			}
		}
	}
	return 0;
}

/* The rankings of closures by prototype and of strings by prefix. */
static void rank(struct walk *w)
{
	struct census *c = w->c;

	for (size_t i = 0; i < w->npt; i++) {
		int k = c->nprotos < CENSUS_TOP ? c->nprotos++ : CENSUS_TOP - 1;

		if (k == CENSUS_TOP - 1 && c->nprotos == CENSUS_TOP &&
		    c->protos[k].closures >= w->pt[i].closures)
			continue;
		for (; k > 0 && c->protos[k - 1].closures < w->pt[i].closures; k--)
			c->protos[k] = c->protos[k - 1];
		c->protos[k] = (struct census_proto){ .addr = w->pt[i].addr,
						      .closures = w->pt[i].closures,
						      .bytes = w->pt[i].bytes,
						      .closure = w->pt[i].closure };
	}
	for (size_t i = 0; i < w->npre; i++) {
		int k = c->nprefixes < CENSUS_TOP ? c->nprefixes++ : CENSUS_TOP - 1;

		if (k == CENSUS_TOP - 1 && c->nprefixes == CENSUS_TOP &&
		    c->prefixes[k].bytes >= w->pre[i].bytes)
			continue;
		for (; k > 0 && c->prefixes[k - 1].bytes < w->pre[i].bytes; k--)
			c->prefixes[k] = c->prefixes[k - 1];
		c->prefixes[k] = (struct census_prefix){ .strings = w->pre[i].strings,
							 .bytes = w->pre[i].bytes };
		snprintf(c->prefixes[k].text, sizeof(c->prefixes[k].text), "%s", w->pre[i].text);
	}
}

/* Where each ranked prototype was defined: its chunk's name and first line. */
static void name_protos(struct walk *w)
{
	const struct lj_layout *lj = w->lj;

	for (int i = 0; i < w->c->nprotos; i++) {
		struct census_proto *p = &w->c->protos[i];
		unsigned char name[80];
		__u64 s = 0;
		__u32 len = 0;
		__s32 line = 0;

		snprintf(p->where, sizeof(p->where), "?");
		if (procmem__read(w->mem.pid, &s, 8, p->addr + lj->pt_chunkname) ||
		    procmem__read(w->mem.pid, &line, 4, p->addr + lj->pt_firstline))
			continue;
		s &= LJ_GCVMASK;
		if (procmem__read(w->mem.pid, &len, 4, s + lj->str_len))
			continue;
		if (len >= sizeof(name))	/* a path: its end names it */
			s += len - (sizeof(name) - 1), len = sizeof(name) - 1;
		if (procmem__read(w->mem.pid, name, len, s + lj->str_size))
			continue;
		name[len] = '\0';
		snprintf(p->where, sizeof(p->where), "%s:%d",
			 name[0] == '@' || name[0] == '=' ? (char *)name + 1 : (char *)name, line);
	}
}

/* The ranked tables' and closures' reference paths. Out of memory, they
 * stay "" (unreached). */
static void find_paths(struct walk *w, __u64 g)
{
	struct census *c = w->c;
	struct refs *r;
	/* What refers to others: the paths' table holds those (strings and
	 * cdata are kept apart). */
	size_t containers = c->type[HEAP_TABLE].objects + c->type[HEAP_LUA_FUNCTION].objects +
			    c->type[HEAP_C_FUNCTION].objects + c->type[HEAP_THREAD].objects +
			    c->type[HEAP_USERDATA].objects;

	if (!(r = refs__walk(&w->mem, w->lj, g, containers)))
		return;
	c->reached = refs__reached(r);
	if (refs__groups(r, &c->paths))
		path_groups__free(&c->paths);	/* out of memory: none */
	for (int i = 0; i < c->ntables; i++)
		if (refs__path(r, c->tables[i].addr, c->tables[i].path, CENSUS_PATH))
			c->tables[i].path[0] = '\0';
	for (int i = 0; i < c->nprotos; i++)
		if (refs__path(r, c->protos[i].closure, c->protos[i].path, CENSUS_PATH))
			c->protos[i].path[0] = '\0';
	refs__free(r);
}

void census__free(struct census *c)
{
	path_groups__free(&c->paths);
}

int census__take(const struct lj_target *t, __u64 g, struct census *c, char *err, size_t errsz)
{
	const struct lj_layout *lj = &t->layout;
	struct walk w = { .lj = lj, .c = c };
	__u64 root = 0, mmudata = 0, first = 0;
	double t0 = monotonic_s();
	int ret = -1;

	memset(c, 0, sizeof(*c));
	c->g = g;
	if (!lj->g_gc_total || !lj->tab_size || !lj->g_str_tab) {
		snprintf(err, errsz, "this LuaJIT's layout does not describe its heap (a revision "
			 "before the string table's redesign of 2020-06?): no census");
		return -1;
	}
	if (heapmem__init(&w.mem, t->pid)) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	w.GG = g - lj->gg_g;
	if (procmem__read(t->pid, &c->gc_total, 8, g + lj->g_gc_total) ||
	    procmem__read(t->pid, &root, 8, g + lj->g_gc_root)) {
		snprintf(err, errsz, "cannot read the VM at 0x%llx of PID %d: %s",
			 (unsigned long long)g, t->pid, strerror(errno));
		goto out;
	}
	c->vm_bytes = lj->gg_size;
	/* gc.mmudata, the last of the circle of userdata with finalizers. */
	procmem__read(t->pid, &mmudata, 8, g + lj->g_gc_mmudata);
	mmudata &= LJ_GCVMASK;
	if (walk_list(&w, root & LJ_GCVMASK, 0))
		goto oom;
	if (mmudata && !procmem__read(t->pid, &first, 8, mmudata + lj->gc_nextgc) &&
	    walk_list(&w, first & LJ_GCVMASK, first & LJ_GCVMASK))
		goto oom;
	if (walk_strings(&w, g) < 0)
		goto oom;

	rank(&w);
	name_protos(&w);
	find_paths(&w, g);
	procmem__read(t->pid, &c->gc_total_after, 8, g + lj->g_gc_total);
	c->seconds = monotonic_s() - t0;
	ret = 0;
	goto out;
oom:
	snprintf(err, errsz, "out of memory");
out:
	heapmem__free(&w.mem);
	free(w.pt);
	free(w.pre);
	keymap__free(&w.protos);
	keymap__free(&w.prefixes);
	return ret;
}
