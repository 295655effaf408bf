/* SPDX-License-Identifier: MIT */
/*
 * pairmap.h - caches keyed by two u64 (a prototype and a bytecode position,
 * say): open addressing, the values owned by the caller. Not thread-safe.
 */
#ifndef NUPP_PAIRMAP_H
#define NUPP_PAIRMAP_H

#include <stddef.h>
#include <linux/types.h>

struct pairmap_slot {
	__u64 k1, k2;
	void *v;	/* NULL: free slot */
};

struct pairmap {
	struct pairmap_slot *slots;
	size_t cap;	/* a power of two, or 0 */
	size_t n;
};

/* The value under (k1, k2), or NULL. */
void *pairmap__get(const struct pairmap *m, __u64 k1, __u64 k2);
/* Insert a new key (absent from m), v not NULL; 0 or -ENOMEM. */
int pairmap__put(struct pairmap *m, __u64 k1, __u64 k2, void *v);
/* Free every value with release, then empty the map. */
void pairmap__clear(struct pairmap *m, void (*release)(void *));

#endif /* NUPP_PAIRMAP_H */
