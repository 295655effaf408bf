/* SPDX-License-Identifier: MIT */
/*
 * rotate.h - continuous mode: `record --rotate SECONDS -o DIR` writes one
 * complete profile per interval into DIR, named by the first target's pid
 * and the interval's start (DIR/nupp-PID-20261202T011500Z.pb.gz, UTC), and
 * keeps at most --keep of them.
 *
 * Each file is a profile of its own (title, start, duration, period) of the
 * samples counted in its interval (interval.h), in the format asked, pprof
 * unless told: the files of a session add up to its total, and the last one
 * holds what came after the last rotation. A pprof file says what its
 * interval cost, as its second comment ("nupp-bpf: 59812 samples; its own
 * CPU 0.412 s over 60.0 s (0.69% of a core)"), so that a fleet can watch
 * the profiler's cost from the files alone. A file appears whole, through
 * output.h's new file and rename, so that an agent watching DIR (a
 * Pyroscope or Parca uploader) never reads one half-written.
 */
#ifndef NUPP_ROTATE_H
#define NUPP_ROTATE_H

#include <sys/types.h>
#include "profile/formats.h"
#include "sampler/sampler.h"

struct rotate_opts {
	const char *dir;		/* where the files go */
	unsigned seconds;		/* the interval */
	unsigned keep;			/* files kept, 0 for all */
	enum profile_format format;
	const struct render_opts *render;
	const char *title;		/* what is profiled; read at each file */
	pid_t pid;			/* named in the files */
};

struct rotate;

/* Check that o->dir is a directory nupp-bpf can write in. NULL with a
 * one-line reason in err. */
struct rotate *rotate__open(const struct rotate_opts *o, char *err, size_t errsz);

/* The first interval starts now. */
void rotate__start(struct rotate *rt);

/* When the interval is over, write it: the samples s counted in it. 0, or
 * -1 with a one-line reason in err. */
int rotate__tick(struct rotate *rt, struct sampler *s, char *err, size_t errsz);

/* Write the last interval, from p: the session's final counts (as
 * sampler__collect gave them, a sample counting for weight at the end;
 * p's counts become the interval's). 0, or -1
 * with a one-line reason in err. */
int rotate__finish(struct rotate *rt, struct profile *p, unsigned weight, char *err,
		   size_t errsz);

/* How many files were written. */
unsigned rotate__written(const struct rotate *rt);

void rotate__close(struct rotate *rt);

#endif /* NUPP_ROTATE_H */
