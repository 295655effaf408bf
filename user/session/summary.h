/* SPDX-License-Identifier: MIT */
/* summary.h - what a session says on stderr at its end: the samples' VM
 * states, what was outside Lua or unresolved and why, the top stacks; the
 * trace aborts' blocking sites with what to do about them. */
#ifndef NUPP_SUMMARY_H
#define NUPP_SUMMARY_H

#include "profile/profile.h"
#include "sampler/sampler.h"
#include "trace/trace.h"

/* The samples of p (rendered as ro renders them) over seconds, with the
 * sampler's counts st; depth is --depth, named when stacks were cut. */
void summary__samples(const struct profile *p, const struct render_opts *ro,
		      const struct sampler_stats *st, double seconds, unsigned depth);

/* The trace aborts: totals, and the first five sites that blacklist or block. */
void summary__trace(const struct trace_report *rep);

#endif /* NUPP_SUMMARY_H */
