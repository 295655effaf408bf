/* SPDX-License-Identifier: MIT */
/*
 * profile.h - aggregated samples and their collapsed-stack rendering.
 *
 * A row is one distinct (process, thread, VM, zone, rendered stack) with its
 * sample counts by VM state. Rendering merges rows into the spec's
 * SampleReport text: outermost frame first, ';' between frames, a space, the
 * count; lines by count descending, then by stack.
 */
#ifndef NUPP_PROFILE_H
#define NUPP_PROFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>
#include "../bpf/sampler.h"

struct profile_row {
	__u32 pid, tid;
	__u64 g;			/* global_State of the VM */
	char *zone;			/* zone path, "" when none was open */
	char *stack;			/* rendered frames, outermost first */
	bool unreadable;		/* some frames rendered as [unknown] */
	__u64 state[NUPP_ST_MAX];	/* samples by enum nupp_state */
};

struct profile {
	struct profile_row *rows;
	size_t nrows, cap;
};

struct render_opts {
	const char *root;		/* module to cut stacks back to, or NULL */
	const char *zone;		/* zone path prefix to keep, or NULL */
	bool threads;			/* a leading "[pid/tid vm 0x…]" frame per thread */
	bool zones;			/* a leading "[zone path]" frame when a zone was open */
};

/* Add a row (strings copied); its index, or -1 when out of memory. */
long profile__add(struct profile *p, __u32 pid, __u32 tid, __u64 g, const char *zone,
		  const char *stack);
void profile__free(struct profile *p);
__u64 profile_row__count(const struct profile_row *r);

/* Whether a zone path lies under the prefix ("a/b" holds "a/b" and "a/b/c"). */
bool zone__under(const char *zone, const char *prefix);

/* The stack cut back to its outermost frame from module root ("root:…"),
 * or the whole stack when no frame is from it. Returns a pointer into stack. */
const char *stack__cut_root(const char *stack, const char *root);

/* Totals by state over the rows that pass the zone filter. */
void profile__totals(const struct profile *p, const struct render_opts *o,
		     __u64 state[NUPP_ST_MAX]);

/* Write the collapsed-stack text; returns the number of distinct lines, or
 * -1 on a write error. samples, when not NULL, receives the total count. */
long profile__write_collapsed(const struct profile *p, const struct render_opts *o,
			      FILE *out, __u64 *samples);

#endif /* NUPP_PROFILE_H */
