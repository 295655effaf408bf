/* SPDX-License-Identifier: MIT */
/*
 * top.h - `nupp-bpf top`: a live view of the targets, refreshed each second.
 *
 * The hottest functions by self share (samples with the function as leaf)
 * and total share (samples with it anywhere on the stack) in the last
 * second, with their samples since the start; the VM-state split; trace
 * aborts and blacklistings as the trace channel reports them. Keys, as
 * top(1) has them: s (or P) sorts by self share, t by total share, S by
 * self samples since the start, T (top's TIME+) by total samples since the
 * start; q quits. On a terminal that cannot place text (TERM=dumb or unset,
 * or stdout not a terminal) the view is printed as plain text each second
 * instead, one block after another.
 */
#ifndef NUPP_TOP_H
#define NUPP_TOP_H

#include <stdbool.h>
#include "profile/profile.h"
#include "sampler/sampler.h"
#include "trace/trace.h"

struct top_opts {
	const struct render_opts *render;	/* --zone, --root apply */
	const char *title;			/* what is profiled; read at each refresh */
	unsigned rate_hz;			/* samples per second, 0 when unknown */
	bool off_cpu;				/* counts are µs off the CPU (--off-cpu) */
};

struct top;

/* Take the terminal (raw keys, the alternate screen) when there is one;
 * NULL when out of memory. */
struct top *top__open(const struct top_opts *o);

/* Called every few milliseconds: read the keys, and each second refresh
 * from the sampler s and the tracer tr (NULL when not tracing). true once
 * q was pressed. */
bool top__tick(struct top *t, struct sampler *s, struct tracer *tr);

/* Give the terminal back as it was. */
void top__close(struct top *t);

#endif /* NUPP_TOP_H */
