/* SPDX-License-Identifier: MIT */
/*
 * pprof.h - a profile in pprof's format: profile.proto, gzip'd.
 *
 * What `go tool pprof`, Grafana Pyroscope, Parca and Google Cloud Profiler
 * read. Each row becomes one sample per VM state it has samples in, with
 * two values, samples/count and cpu/nanoseconds (the count times the
 * sampling period), and labels: vmstate (compiled, interpreted, C, GC,
 * compiling), zone (its path, when one was open), and with --threads the
 * pid, tid and vm of the thread, which collapsed stacks show as a leading
 * frame instead (pprof -tagroot=vmstate or -tagroot=pid,tid brings them in
 * as frames). A frame is a Location with one Line: a Lua function is a
 * Function with its chunk as filename and the line it starts at, the Line
 * the line that was running; a C function's Location has its address, in a
 * Mapping of the file it lies in. --root and --zone apply as to collapsed
 * stacks, so that pprof's shares equal theirs.
 */
#ifndef NUPP_PPROF_H
#define NUPP_PPROF_H

#include <stdio.h>
#include "profile.h"

/* Write p as a gzip'd profile.proto; 0, or -1 on a write error or out of
 * memory. */
int pprof__write(const struct profile *p, const struct render_opts *o, FILE *out);

#endif /* NUPP_PPROF_H */
