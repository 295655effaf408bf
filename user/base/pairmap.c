// SPDX-License-Identifier: MIT
/* pairmap.c - caches keyed by two u64 (pairmap.h). */
#include <errno.h>
#include <stdlib.h>
#include "pairmap.h"

static size_t pair_hash(__u64 k1, __u64 k2)
{
	__u64 h = k1 * 0x9e3779b97f4a7c15ULL ^ (k2 + 0x632be59bd9b4e019ULL);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ULL;
	return (size_t)(h ^ (h >> 29));
}

static struct pairmap_slot *slot_of(const struct pairmap *m, __u64 k1, __u64 k2)
{
	size_t i = pair_hash(k1, k2) & (m->cap - 1);

	while (m->slots[i].v && (m->slots[i].k1 != k1 || m->slots[i].k2 != k2))
		i = (i + 1) & (m->cap - 1);
	return &m->slots[i];
}

void *pairmap__get(const struct pairmap *m, __u64 k1, __u64 k2)
{
	return m->cap ? slot_of(m, k1, k2)->v : NULL;
}

static int grow(struct pairmap *m)
{
	struct pairmap old = *m;
	size_t i;

	m->cap = old.cap ? old.cap * 2 : 64;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -ENOMEM;
	}
	for (i = 0; i < old.cap; i++)
		if (old.slots[i].v)
			*slot_of(m, old.slots[i].k1, old.slots[i].k2) = old.slots[i];
	free(old.slots);
	return 0;
}

int pairmap__put(struct pairmap *m, __u64 k1, __u64 k2, void *v)
{
	struct pairmap_slot *sl;

	if ((m->n + 1) * 2 > m->cap && grow(m))
		return -ENOMEM;
	sl = slot_of(m, k1, k2);
	*sl = (struct pairmap_slot){ k1, k2, v };
	m->n++;
	return 0;
}

void pairmap__clear(struct pairmap *m, void (*release)(void *))
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		if (m->slots[i].v)
			release(m->slots[i].v);
	free(m->slots);
	*m = (struct pairmap){ 0 };
}
