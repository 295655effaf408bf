/* SPDX-License-Identifier: MIT */
/*
 * census.h - what holds a LuaJIT heap, read from outside the process.
 *
 * A census walks one VM's lists as its collector does (kernel-notes/heap.md):
 * every object but strings on g->gc.root, userdata with finalizers on the
 * circle g->gc.mmudata closes, strings on the chains of the string table
 * g->str.tab. Each object is read, checked (its type tag, sizes in bounds,
 * 8-aligned addresses) and counted by type with the bytes the collector
 * counts for it (what lj_gc.c subtracts from g->gc.total when it frees it),
 * so that the sum can be set against g->gc.total, which is
 * collectgarbage("count") * 1024. The heap is copied first, mapping by
 * mapping, and the copy walked (census.c says why). The process runs on
 * meanwhile (unless the caller stopped it): an object allocated during the
 * copy may be missed, a list cut by a sweep ends the walk early; what could
 * not be read or did not check is counted, never guessed.
 */
#ifndef NUPP_CENSUS_H
#define NUPP_CENSUS_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <linux/types.h>
#include "objects.h"
#include "paths.h"
#include "luajit/lj_target.h"

struct heap_count {
	__u64 objects, bytes;
};

#define CENSUS_TOP	20	/* rows of each ranking */

#define CENSUS_PATH	160	/* bytes of a reference path kept */

struct census_table {
	__u64 addr, bytes;
	__u32 asize, hsize;	/* array slots, hash slots */
	char path[CENSUS_PATH];	/* from a root (paths.h); "" unreached */
};

struct census_proto {
	__u64 addr, closures, bytes;	/* its closures and their bytes */
	__u64 closure;			/* one of them */
	char where[96];			/* chunk:line of its definition */
	char path[CENSUS_PATH];		/* that closure's, from a root */
};

struct census_prefix {
	char text[24];			/* the strings' first bytes, escaped */
	__u64 strings, bytes;
};

struct census {
	__u64 g;			/* the VM */
	__u64 gc_total, gc_total_after;	/* g->gc.total before and after the walk */
	struct heap_count type[HEAP_TYPES];
	__u64 vm_bytes;			/* GG_State and the string table */
	__u64 unreadable;		/* objects whose memory could not be read */
	__u64 invalid;			/* objects that did not check (type, sizes) */
	bool cut;			/* a list ended early: a sweep, or the limit */
	struct census_table tables[CENSUS_TOP];	/* the largest, largest first */
	int ntables;
	struct census_proto protos[CENSUS_TOP];	/* most closures first */
	int nprotos;
	struct census_prefix prefixes[CENSUS_TOP];	/* most bytes first */
	int nprefixes;
	__u64 reached;			/* objects the reference paths reached */
	struct path_groups paths;	/* what they hold, by path (paths.h) */
	double seconds;			/* the walk's wall time */
};

/* The census of VM g of t's process. 0, or -1 with why in err (a build
 * whose layout does not describe the heap, a VM that cannot be read). */
int census__take(const struct lj_target *t, __u64 g, struct census *c, char *err, size_t errsz);

void census__free(struct census *c);

/* The objects' bytes counted, and their share of g->gc.total. */
__u64 census__counted(const struct census *c);

/* Bytes for a person: B, KiB, MiB or GiB with one decimal, signed when
 * negative or asked. */
const char *census__bytes(__s64 n, bool sign, char buf[32]);

/* c's path groups, most retained first, as indexes (malloc'd; NULL when
 * none or out of memory): of them JSON and the Lua API keep the first
 * CENSUS_PATHS_KEPT. */
#define CENSUS_PATHS_KEPT	2000
size_t *census__paths_ranked(const struct census *c);

void census__print(const struct census *c, FILE *f);
void census__print_json(const struct census *const *c, int n, pid_t pid, double pause_s, FILE *f);

#endif /* NUPP_CENSUS_H */
