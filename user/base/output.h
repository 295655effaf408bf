/* SPDX-License-Identifier: MIT */
/*
 * output.h - the files nupp-bpf writes, written as a root tool must.
 *
 * nupp-bpf runs as root and is pointed at paths like /tmp/app.collapsed, in
 * directories anyone can write to. An output is therefore written to a new
 * file of its own in the same directory and renamed over its name at the
 * end: a symlink planted at the name is replaced, never followed, and a
 * failed run leaves whatever was there untouched. An existing file of that
 * name is kept as NAME.old, as perf record keeps perf.data.old. Devices and
 * FIFOs (-o /dev/null), and names under /dev and /proc (/dev/stdout, a
 * symlink only root could have made), are written in place; "-" is stdout.
 */
#ifndef NUPP_OUTPUT_H
#define NUPP_OUTPUT_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

struct output {
	FILE *f;		/* NULL when there is no such output */
	char name[PATH_MAX];	/* as given; "" for none */
	char tmp[PATH_MAX];	/* the new file while it is written, "" when in place */
};

/* Start writing output name ("" for none). 0, or -1 with a one-line error. */
int output__open(struct output *o, const char *name, char *err, size_t errsz);

/* Finish it: everything written, the old file (if any) kept as NAME.old, the
 * new one in its place. 0, or -1 with a one-line error. */
int output__commit(struct output *o, char *err, size_t errsz);

/* Drop it: the new file goes, the old one stays as it was. */
void output__discard(struct output *o);

#endif /* NUPP_OUTPUT_H */
