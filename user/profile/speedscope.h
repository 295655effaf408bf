/* SPDX-License-Identifier: MIT */
/*
 * speedscope.h - a profile in speedscope's file format (JSON).
 *
 * The format speedscope documents (https://www.speedscope.app/
 * file-format-schema.json): a table of frames shared by every profile in
 * the file, each with its name, file and line, and "sampled" profiles
 * whose samples are lists of indexes into it, outermost frame first, each
 * weighed by its sample count (unit "none"). A frame here is a function,
 * as collapsed stacks name it: a Lua function with its chunk and the line
 * it starts at, a C function with the file it lies in. With --threads the
 * file holds one profile per thread and VM, named "PID/TID vm ADDR";
 * otherwise one, named after what was profiled. --zones starts each stack
 * with a "[zone PATH]" frame, --root and --zone apply, as in collapsed
 * stacks.
 */
#ifndef NUPP_SPEEDSCOPE_H
#define NUPP_SPEEDSCOPE_H

#include <stdio.h>
#include "profile.h"

/* Write p as a speedscope file; 0, or -1 on a write error or out of memory. */
int speedscope__write(const struct profile *p, const struct render_opts *o, FILE *out);

#endif /* NUPP_SPEEDSCOPE_H */
