// SPDX-License-Identifier: MIT
/* diff.c - what grew between two censuses of a heap (diff.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "diff.h"
#include "base/keymap.h"
#include "base/text.h"

#define GREW_SHOWN	20	/* paths of the text's list; JSON has them all */

int census_view__of(const struct census *c, struct census_view *v)
{
	*v = (struct census_view){ .g = c->g, .gc_total = c->gc_total };
	memcpy(v->type, c->type, sizeof(v->type));
	if (c->paths.n && !(v->paths = calloc(c->paths.n, sizeof(*v->paths))))
		return -1;
	for (size_t i = 0; i < c->paths.n; i++) {
		const struct path_group *g = &c->paths.g[i];
		struct view_path *p = &v->paths[i];

		path_groups__text(&c->paths, i, p->path, sizeof(p->path));
		p->objects = g->objects;
		p->bytes = g->bytes;
		p->retained_objects = g->retained_objects;
		p->retained = g->retained;
	}
	v->npaths = c->paths.n;
	return 0;
}

void census_view__free(struct census_view *v)
{
	free(v->paths);
	v->paths = NULL;
	v->npaths = 0;
}

static __u64 number(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) && json_integer_value(v) > 0 ? (__u64)json_integer_value(v) : 0;
}

/* One VM of a file: "vm", "gcTotal", "types", "byPath". */
static int read_vm(json_t *vm, struct census_view *v)
{
	json_t *types = json_object_get(vm, "types"), *paths = json_object_get(vm, "byPath");
	const char *g = json_string_value(json_object_get(vm, "vm"));

	if (!json_is_object(types) || !json_is_array(paths) || !g)
		return -1;
	v->g = strtoull(g, NULL, 16);
	v->gc_total = number(vm, "gcTotal");
	for (int i = 0; i < HEAP_TYPES; i++) {
		json_t *t = json_object_get(types, heap_type_names[i]);

		v->type[i].objects = number(t, "objects");
		v->type[i].bytes = number(t, "bytes");
	}
	if (json_array_size(paths) && !(v->paths = calloc(json_array_size(paths), sizeof(*v->paths))))
		return -1;
	for (size_t i = 0; i < json_array_size(paths); i++) {
		json_t *p = json_array_get(paths, i);
		const char *text = json_string_value(json_object_get(p, "path"));
		struct view_path *vp = &v->paths[v->npaths];

		if (!text)
			return -1;
		snprintf(vp->path, sizeof(vp->path), "%s", text);
		vp->objects = number(p, "objects");
		vp->bytes = number(p, "bytes");
		vp->retained_objects = number(p, "retainedObjects");
		vp->retained = number(p, "retainedBytes");
		v->npaths++;
	}
	return 0;
}

int census_view__read(const char *file, struct census_view **vms, int *n, pid_t *pid,
		      char *err, size_t errsz)
{
	json_error_t je;
	json_t *root = json_load_file(file, 0, &je), *list;
	int ret = -1;

	*vms = NULL;
	*n = 0;
	if (!root) {
		if (je.line > 0)
			snprintf(err, errsz, "%s: %s (line %d)", file, je.text, je.line);
		else	/* "unable to open FILE: why" */
			snprintf(err, errsz, "%s", je.text);
		return -1;
	}
	list = json_object_get(root, "vms");
	if (!json_is_array(list) || !json_object_get(root, "pid")) {
		snprintf(err, errsz, "%s: not a census (heap --json writes one)", file);
		goto out;
	}
	*pid = (pid_t)number(root, "pid");
	if (json_array_size(list) && !(*vms = calloc(json_array_size(list), sizeof(**vms)))) {
		snprintf(err, errsz, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(list); i++, (*n)++)
		if (read_vm(json_array_get(list, i), &(*vms)[i])) {
			snprintf(err, errsz, "%s: VM %zu is not a census of this version (no byPath: "
				 "take it again with this nupp-bpf)", file, i + 1);
			goto out;
		}
	ret = 0;
out:
	if (ret) {
		for (int i = 0; i <= *n && *vms; i++)
			census_view__free(&(*vms)[i]);
		free(*vms);
		*vms = NULL;
		*n = 0;
	}
	json_decref(root);
	return ret;
}

static int by_growth(const void *x, const void *y)
{
	const struct heap_growth *a = x, *b = y;

	return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : strcmp(a->path, b->path);
}

/* The paths that grew from a to b, most own bytes first, into *out. */
static int growth(const struct census_view *a, const struct census_view *b, struct heap_growth **out,
		  size_t *n)
{
	struct keymap before = {};
	struct heap_growth *gr = b->npaths ? calloc(b->npaths, sizeof(*gr)) : NULL;

	*n = 0;
	if (b->npaths && !gr)
		return -1;
	for (size_t i = 0; a && i < a->npaths; i++)
		if (keymap__put(&before, a->paths[i].path, strlen(a->paths[i].path), (long)i)) {
			keymap__free(&before);
			free(gr);
			return -1;
		}
	for (size_t i = 0; i < b->npaths; i++) {
		const struct view_path *p = &b->paths[i], *o = NULL;
		long k = a ? keymap__get(&before, p->path, strlen(p->path)) : -1;
		struct heap_growth g;

		if (k >= 0)
			o = &a->paths[k];
		g = (struct heap_growth){
			p->path, (__s64)p->objects - (__s64)(o ? o->objects : 0),
			(__s64)p->bytes - (__s64)(o ? o->bytes : 0),
			(__s64)p->retained_objects - (__s64)(o ? o->retained_objects : 0),
			(__s64)p->retained - (__s64)(o ? o->retained : 0) };
		if (g.bytes > 0 || (g.bytes == 0 && g.objects > 0))
			gr[(*n)++] = g;
	}
	keymap__free(&before);
	qsort(gr, *n, sizeof(*gr), by_growth);
	*out = gr;
	return 0;
}

/* b's VM in a: the one at the same address, or the only one of each. */
static const struct census_view *pair(const struct census_view *a, int na,
				      const struct census_view *b, int nb)
{
	for (int i = 0; i < na; i++)
		if (a[i].g == b->g)
			return &a[i];
	return na == 1 && nb == 1 ? a : NULL;
}

static void print_vm_text(const struct census_view *a, const struct census_view *b, FILE *f)
{
	struct heap_growth *gr = NULL;
	size_t n = 0;
	char x[32], y[32], z[32];

	fprintf(f, "VM 0x%" PRIx64 ": collectgarbage(\"count\") %s -> %s (%s)%s\n", (uint64_t)b->g,
		census__bytes(a ? (__s64)a->gc_total : 0, false, x),
		census__bytes((__s64)b->gc_total, false, y),
		census__bytes((__s64)b->gc_total - (__s64)(a ? a->gc_total : 0), true, z),
		a ? "" : ": new since the first census");
	fprintf(f, "  %-14s %12s %12s\n", "type", "objects", "bytes");
	for (int i = 0; i < HEAP_TYPES; i++) {
		__s64 dn = (__s64)b->type[i].objects - (__s64)(a ? a->type[i].objects : 0);
		__s64 db = (__s64)b->type[i].bytes - (__s64)(a ? a->type[i].bytes : 0);

		if (dn || db)
			fprintf(f, "  %-14s %+12" PRId64 " %12s\n", heap_type_names[i], (int64_t)dn,
				census__bytes(db, true, x));
	}
	if (growth(a, b, &gr, &n)) {
		fputs("  (out of memory: no paths)\n", f);
		return;
	}
	if (!n)
		fputs("no reference path grew\n", f);
	else
		fputs("grew, by reference path (own bytes; \"[*]\" the entries of a collection):\n"
		      "       objects   own bytes    retains  path\n", f);
	for (size_t i = 0; i < n && i < GREW_SHOWN; i++)
		fprintf(f, "  %+12" PRId64 " %11s %10s  %s\n", (int64_t)gr[i].objects,
			census__bytes(gr[i].bytes, true, x), census__bytes(gr[i].retained, true, y),
			gr[i].path);
	free(gr);
}

static void print_vm_json(const struct census_view *a, const struct census_view *b, FILE *f)
{
	struct heap_growth *gr = NULL;
	size_t n = 0;

	fprintf(f, "{\"vm\": \"0x%" PRIx64 "\", \"gcTotal\": [%" PRIu64 ", %" PRIu64 "], \"types\": {",
		(uint64_t)b->g, (uint64_t)(a ? a->gc_total : 0), (uint64_t)b->gc_total);
	for (int i = 0; i < HEAP_TYPES; i++)
		fprintf(f, "%s\"%s\": {\"objects\": %" PRId64 ", \"bytes\": %" PRId64 "}", i ? ", " : "",
			heap_type_names[i],
			(int64_t)((__s64)b->type[i].objects - (__s64)(a ? a->type[i].objects : 0)),
			(int64_t)((__s64)b->type[i].bytes - (__s64)(a ? a->type[i].bytes : 0)));
	fputs("}, \"grew\": [", f);
	growth(a, b, &gr, &n);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{\"path\": ", i ? ", " : "");
		text__put_json(f, gr[i].path);
		fprintf(f, ", \"objects\": %" PRId64 ", \"bytes\": %" PRId64 ", \"retainedObjects\": %"
			PRId64 ", \"retainedBytes\": %" PRId64 "}", (int64_t)gr[i].objects,
			(int64_t)gr[i].bytes, (int64_t)gr[i].retained_objects, (int64_t)gr[i].retained);
	}
	free(gr);
	fputs("]}", f);
}

void heap_diff__print(const struct census_view *a, int na, const struct census_view *b, int nb,
		      pid_t pid, double seconds, bool json, FILE *f)
{
	if (json)
		fprintf(f, "{\"pid\": %d, \"seconds\": %.3f, \"vms\": [", (int)pid, seconds);
	else if (seconds > 0)
		fprintf(f, "nupp-bpf: heap of PID %d: what grew in %.1f s\n", (int)pid, seconds);
	else
		fprintf(f, "nupp-bpf: heap of PID %d: what grew between the two censuses\n", (int)pid);
	for (int i = 0; i < nb; i++) {
		const struct census_view *old = pair(a, na, &b[i], nb);

		if (json) {
			fputs(i ? ", " : "", f);
			print_vm_json(old, &b[i], f);
		} else {
			print_vm_text(old, &b[i], f);
		}
	}
	for (int i = 0; !json && i < na; i++)
		if (!pair(b, nb, &a[i], na))
			fprintf(f, "VM 0x%" PRIx64 ": gone since the first census\n", (uint64_t)a[i].g);
	if (json)
		fputs("]}\n", f);
}

int heap_diff__growth(const struct census_view *a, int na, const struct census_view *b, int nb,
		      struct heap_growth **out, size_t *n)
{
	return growth(pair(a, na, b, nb), b, out, n);
}
