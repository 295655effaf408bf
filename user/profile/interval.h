/* SPDX-License-Identifier: MIT */
/*
 * interval.h - what a profile gained since the last look.
 *
 * The live jobs (top's view, --rotate's files) show or write the samples of
 * one interval at a time, while the sampler counts from the session's start:
 * sampler__collect hands back every row with its counts so far, in the
 * sampler's own order, where a row keeps its index and new rows come last.
 * An interval remembers each row's counts at the last look and turns the
 * next collected profile into the difference. Nothing is read twice or
 * skipped: the intervals of a session add up to its total, sample for
 * sample.
 */
#ifndef NUPP_INTERVAL_H
#define NUPP_INTERVAL_H

#include <stddef.h>
#include "profile.h"

/* What an interval remembers of a row: its counts by state, and an
 * allocation profile's blocks (what is in use is not a count: each interval
 * says it as it is at its end). */
#define INTERVAL_COUNTS	(NUPP_ST_MAX + 1)

struct interval {
	__u64 (*seen)[INTERVAL_COUNTS];	/* each row's counts at the last look */
	size_t nseen, cap;
};

/* p, a profile as sampler__collect makes it, gets the counts it gained
 * since the last call (since the start on the first); 0, or -1 when out of
 * memory (p and the interval unchanged). */
int interval__take(struct interval *iv, struct profile *p);

void interval__free(struct interval *iv);

#endif /* NUPP_INTERVAL_H */
