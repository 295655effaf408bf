// SPDX-License-Identifier: MIT
/* interval.c - per-interval counts from cumulative profiles (interval.h). */
#include <stdlib.h>
#include <string.h>
#include "interval.h"

int interval__take(struct interval *iv, struct profile *p)
{
	if (p->nrows > iv->cap) {
		size_t cap = p->nrows * 2;
		void *seen = realloc(iv->seen, cap * sizeof(*iv->seen));

		if (!seen)
			return -1;
		iv->seen = seen;
		iv->cap = cap;
	}
	for (size_t i = 0; i < p->nrows; i++) {
		__u64 *state = p->rows[i].state, objects = p->rows[i].alloc.objects;

		if (i >= iv->nseen)
			memset(iv->seen[i], 0, sizeof(iv->seen[i]));
		for (int s = 0; s < NUPP_ST_MAX; s++) {
			__u64 now = state[s];

			state[s] = now - iv->seen[i][s];	/* a row's counts only grow */
			iv->seen[i][s] = now;
		}
		/* Blocks are rounded from a fixed-point sum: they only grow too. */
		p->rows[i].alloc.objects = objects - iv->seen[i][NUPP_ST_MAX];
		iv->seen[i][NUPP_ST_MAX] = objects;
	}
	if (p->nrows > iv->nseen)
		iv->nseen = p->nrows;
	return 0;
}

void interval__free(struct interval *iv)
{
	free(iv->seen);
	memset(iv, 0, sizeof(*iv));
}
