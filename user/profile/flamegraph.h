/* SPDX-License-Identifier: MIT */
/*
 * flamegraph.h - an interactive SVG flame graph of a profile, in one file.
 *
 * Width is samples, the root at the bottom; stacks are merged as collapsed
 * stacks show them (--threads, --zones, --root and --zone apply), children
 * in name order. Each frame is colored by the VM state most of its samples
 * were in (compiled green, interpreted orange, C blue, GC grey, compiling
 * purple; a shade per name tells neighbours apart), so that code that fell
 * out of the JIT stands out. The title says what was profiled, for how
 * long and at what rate, the legend each state's share. A script inside
 * the SVG (user/profile/flamegraph.js) zooms to a clicked frame, searches frame
 * names by regular expression and says what share the matches hold,
 * re-cuts names to fit (a cut name ends in ".."), and shows a hovered
 * frame's samples and VM-state split; it needs no other file.
 */
#ifndef NUPP_FLAMEGRAPH_H
#define NUPP_FLAMEGRAPH_H

#include <stdio.h>
#include "profile.h"

/* Write the flame graph; 0, or -1 on a write error or out of memory. */
int flamegraph__write(const struct profile *p, const struct render_opts *o, FILE *out);

#endif /* NUPP_FLAMEGRAPH_H */
