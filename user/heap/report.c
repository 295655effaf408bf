// SPDX-License-Identifier: MIT
/* report.c - a census as text and as JSON (census.h). */
#include <inttypes.h>
#include <stdlib.h>
#include "census.h"
#include "base/text.h"

__u64 census__counted(const struct census *c)
{
	__u64 n = c->vm_bytes;

	for (int i = 0; i < HEAP_TYPES; i++)
		n += c->type[i].bytes;
	return n;
}

const char *census__bytes(__s64 n, bool sign, char buf[32])
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = n < 0 ? -(double)n : (double)n;
	int u = 0;

	while (v >= 1024 && u < 4)
		v /= 1024, u++;
	snprintf(buf, 32, u ? "%s%.1f %s" : "%s%.0f %s", n < 0 ? "-" : sign ? "+" : "", v,
		 units[u]);
	return buf;
}

static const char *human(__u64 n, char buf[32])
{
	return census__bytes((__s64)n, false, buf);
}

#define PATHS_TEXT	20	/* groups of paths printed */

static const struct path_groups *sorting;

static int by_bytes(const void *a, const void *b)
{
	__u64 x = sorting->g[*(const size_t *)a].bytes, y = sorting->g[*(const size_t *)b].bytes;

	return x < y ? 1 : x > y ? -1 : 0;
}

static int by_retained(const void *a, const void *b)
{
	__u64 x = sorting->g[*(const size_t *)a].retained, y = sorting->g[*(const size_t *)b].retained;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* pg's groups in the order cmp gives; NULL when there are none or out of
 * memory. */
static size_t *sorted(const struct path_groups *pg, int (*cmp)(const void *, const void *))
{
	size_t *ix = pg->n ? malloc(pg->n * sizeof(*ix)) : NULL;

	if (!ix)
		return NULL;
	for (size_t i = 0; i < pg->n; i++)
		ix[i] = i;
	sorting = pg;
	qsort(ix, pg->n, sizeof(*ix), cmp);
	return ix;
}

size_t *census__paths_ranked(const struct census *c)
{
	return sorted(&c->paths, by_retained);
}

void census__print(const struct census *c, FILE *f)
{
	__u64 counted = census__counted(c), objects = 0;
	char a[32], b[32];
	size_t *ix;

	for (int i = 0; i < HEAP_TYPES; i++)
		objects += c->type[i].objects;
	fprintf(f, "VM 0x%" PRIx64 ": %s counted in %" PRIu64 " objects; collectgarbage(\"count\") "
		"says %s (%.1f%% counted); read in %.2f s\n", (uint64_t)c->g, human(counted, a),
		(uint64_t)objects, human(c->gc_total, b),
		c->gc_total ? 100.0 * counted / c->gc_total : 0.0, c->seconds);
	if (c->unreadable || c->invalid || c->cut)
		fprintf(f, "  partial: %" PRIu64 " objects could not be read, %" PRIu64 " did not "
			"check%s (the heap changed while it was read)\n", (uint64_t)c->unreadable,
			(uint64_t)c->invalid, c->cut ? ", a list was cut short" : "");
	fprintf(f, "  %-14s %12s %12s\n", "type", "objects", "bytes");
	for (int i = 0; i < HEAP_TYPES; i++)
		if (c->type[i].objects)
			fprintf(f, "  %-14s %12" PRIu64 " %12s\n", heap_type_names[i],
				(uint64_t)c->type[i].objects, human(c->type[i].bytes, a));
	fprintf(f, "  %-14s %12s %12s\n", "VM itself", "", human(c->vm_bytes, a));
	if (c->gc_total > counted)
		fprintf(f, "  %-14s %12s %12s  (buffers, the JIT's arrays, cdata payloads)\n",
			"not counted", "", human(c->gc_total - counted, a));
	if (c->ntables) {
		fputs("largest tables:\n", f);
		for (int i = 0; i < c->ntables; i++)
			fprintf(f, "  %12s  %s: %u array slots, %u hash slots\n",
				human(c->tables[i].bytes, a),
				c->tables[i].path[0] ? c->tables[i].path : "(unreached: garbage)",
				c->tables[i].asize, c->tables[i].hsize);
	}
	if (c->nprotos) {
		fputs("closures by prototype:\n", f);
		for (int i = 0; i < c->nprotos; i++)
			fprintf(f, "  %12" PRIu64 " closures %10s  %s%s%s\n",
				(uint64_t)c->protos[i].closures, human(c->protos[i].bytes, a),
				c->protos[i].where, c->protos[i].path[0] ? ", e.g. " : "",
				c->protos[i].path);
	}
	if (c->nprefixes) {
		fputs("strings by prefix:\n", f);
		for (int i = 0; i < c->nprefixes; i++)
			fprintf(f, "  %12" PRIu64 " strings %10s  \"%s\"\n",
				(uint64_t)c->prefixes[i].strings, human(c->prefixes[i].bytes, a),
				c->prefixes[i].text);
	}
	if ((ix = sorted(&c->paths, by_bytes))) {
		fputs("by reference path (what is there; \"[*]\" the entries of a collection):\n"
		      "       objects   own bytes    retains  path\n", f);
		for (size_t i = 0; i < c->paths.n && i < PATHS_TEXT; i++) {
			const struct path_group *g = &c->paths.g[ix[i]];
			char path[CENSUS_PATH];

			path_groups__text(&c->paths, ix[i], path, sizeof(path));
			fprintf(f, "  %12" PRIu64 " %11s %10s  %s\n", (uint64_t)g->objects,
				human(g->bytes, a), human(g->retained, b), path);
		}
		free(ix);
	}
}

static void put_census(FILE *f, const struct census *c)
{
	size_t *ix;

	fprintf(f, "{\"vm\": \"0x%" PRIx64 "\", \"gcTotal\": %" PRIu64
		", \"gcTotalAfter\": %" PRIu64 ", \"counted\": %" PRIu64 ", \"vmBytes\": %" PRIu64,
		(uint64_t)c->g, (uint64_t)c->gc_total, (uint64_t)c->gc_total_after,
		(uint64_t)census__counted(c), (uint64_t)c->vm_bytes);
	fprintf(f, ", \"unreadable\": %" PRIu64 ", \"invalid\": %" PRIu64
		", \"partial\": %s, \"seconds\": %.3f, \"reached\": %" PRIu64 ", \"types\": {",
		(uint64_t)c->unreadable,
		(uint64_t)c->invalid, c->unreadable || c->invalid || c->cut ? "true" : "false",
		c->seconds, (uint64_t)c->reached);
	for (int i = 0; i < HEAP_TYPES; i++) {
		fprintf(f, "%s\"%s\": {\"objects\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
			i ? ", " : "", heap_type_names[i], (uint64_t)c->type[i].objects,
			(uint64_t)c->type[i].bytes);
	}
	fputs("}, \"largestTables\": [", f);
	for (int i = 0; i < c->ntables; i++) {
		fprintf(f, "%s{\"addr\": \"0x%" PRIx64 "\", \"bytes\": %" PRIu64
			", \"arraySlots\": %u, \"hashSlots\": %u, \"path\": ", i ? ", " : "",
			(uint64_t)c->tables[i].addr, (uint64_t)c->tables[i].bytes,
			c->tables[i].asize, c->tables[i].hsize);
		text__put_json(f, c->tables[i].path);
		fputs("}", f);
	}
	fputs("], \"closuresByPrototype\": [", f);
	for (int i = 0; i < c->nprotos; i++) {
		fprintf(f, "%s{\"closures\": %" PRIu64 ", \"bytes\": %" PRIu64
			", \"where\": ", i ? ", " : "", (uint64_t)c->protos[i].closures,
			(uint64_t)c->protos[i].bytes);
		text__put_json(f, c->protos[i].where);
		fputs(", \"path\": ", f);
		text__put_json(f, c->protos[i].path);
		fputs("}", f);
	}
	fputs("], \"stringsByPrefix\": [", f);
	for (int i = 0; i < c->nprefixes; i++) {
		fprintf(f, "%s{\"strings\": %" PRIu64 ", \"bytes\": %" PRIu64
			", \"prefix\": ", i ? ", " : "", (uint64_t)c->prefixes[i].strings,
			(uint64_t)c->prefixes[i].bytes);
		text__put_json(f, c->prefixes[i].text);
		fputs("}", f);
	}
	fputs("], \"byPath\": [", f);
	if ((ix = census__paths_ranked(c))) {
		for (size_t i = 0; i < c->paths.n && i < CENSUS_PATHS_KEPT; i++) {
			const struct path_group *g = &c->paths.g[ix[i]];
			char path[CENSUS_PATH];

			path_groups__text(&c->paths, ix[i], path, sizeof(path));
			fprintf(f, "%s{\"path\": ", i ? ", " : "");
			text__put_json(f, path);
			fprintf(f, ", \"objects\": %" PRIu64 ", \"bytes\": %" PRIu64
				", \"retainedObjects\": %" PRIu64 ", \"retainedBytes\": %" PRIu64 "}",
				(uint64_t)g->objects, (uint64_t)g->bytes,
				(uint64_t)g->retained_objects, (uint64_t)g->retained);
		}
		free(ix);
	}
	fputs("]}", f);
}

void census__print_json(const struct census *const *c, int n, pid_t pid, double pause_s, FILE *f)
{
	fprintf(f, "{\"pid\": %d, \"pausedSeconds\": %.3f, \"vms\": [", (int)pid, pause_s);
	for (int i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		put_census(f, c[i]);
	}
	fputs("]}\n", f);
}
