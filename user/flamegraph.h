/* SPDX-License-Identifier: MIT */
/*
 * flamegraph.h - a self-contained SVG flame graph of a profile.
 *
 * Width is samples; each frame is colored by the VM state most of its
 * samples were in (compiled green, interpreted orange, C blue, GC grey,
 * compiling purple), so code that fell out of the JIT stands out. Hovering
 * a frame shows its samples and full state split. The title says what
 * was profiled.
 */
#ifndef NUPP_FLAMEGRAPH_H
#define NUPP_FLAMEGRAPH_H

#include <stdio.h>
#include "profile.h"

/* Write the flame graph; 0, or -1 on a write error or out of memory. */
int flamegraph__write(const struct profile *p, const struct render_opts *o, FILE *out);

#endif /* NUPP_FLAMEGRAPH_H */
