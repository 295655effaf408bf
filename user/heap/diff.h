/* SPDX-License-Identifier: MIT */
/*
 * diff.h - what grew between two censuses of a heap: a leak hunt.
 *
 * A census is seen here as its counts by type and its groups of reference
 * paths (paths.h) with their own and retained bytes, taken live or read
 * back from `heap --json` files. Objects do not move in a LuaJIT heap, but
 * a path names what holds them across censuses, and across processes: the
 * diff is by path. A path that fell out of a file's list (it keeps the
 * 2,000 that retain most) counts as empty there.
 */
#ifndef NUPP_HEAP_DIFF_H
#define NUPP_HEAP_DIFF_H

#include <stdio.h>
#include <sys/types.h>
#include "census.h"

struct view_path {
	char path[CENSUS_PATH];
	__u64 objects, bytes, retained_objects, retained;
};

struct census_view {
	__u64 g, gc_total;
	struct heap_count type[HEAP_TYPES];
	struct view_path *paths;
	size_t npaths;
};

/* A census's view; 0, or -1 out of memory. */
int census_view__of(const struct census *c, struct census_view *v);

/* The views of the VMs of a `heap --json` file into *vms (*n of them) and
 * its process's id; 0, or -1 with why in err. */
int census_view__read(const char *file, struct census_view **vms, int *n, pid_t *pid,
		      char *err, size_t errsz);

void census_view__free(struct census_view *v);

/* What grew from a to b (na and nb VMs, paired by address, or the only
 * ones), over seconds (0 unknown), as text or JSON. */
void heap_diff__print(const struct census_view *a, int na, const struct census_view *b, int nb,
		      pid_t pid, double seconds, bool json, FILE *f);

/* A path's growth between two censuses. */
struct heap_growth {
	const char *path;	/* the later census's */
	__s64 objects, bytes, retained_objects, retained;
};

/* The paths of VM b that grew since its census in a (na VMs: the one at
 * its address, or the only one), most own bytes first, into *out (*n of
 * them; free it); 0, or -1 out of memory. */
int heap_diff__growth(const struct census_view *a, int na, const struct census_view *b, int nb,
		      struct heap_growth **out, size_t *n);

#endif /* NUPP_HEAP_DIFF_H */
