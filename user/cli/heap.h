/* SPDX-License-Identifier: MIT */
/* heap.h - nupp-bpf heap: a census of the heap of every VM of a process
 * (heap/census.h), or what grew between two (heap/diff.h), on stdout. */
#ifndef NUPP_CLI_HEAP_H
#define NUPP_CLI_HEAP_H

#include <stdbool.h>
#include <sys/types.h>

struct heap_opts {
	pid_t pid;		/* the process, unless two files are diffed */
	bool json;		/* JSON instead of text */
	bool pause;		/* stop it while each census reads it */
	long diff_s;		/* what grew between two censuses this far apart */
	const char *old, *new;	/* or between two files of heap --json */
	const char *const *outputs;	/* -o: bytes by reference path, each file in
					 * the format its extension names */
	int noutputs;
};

/* The command's exit status: 0, or 1 with the error said. */
int heap__run(const struct heap_opts *o);

#endif /* NUPP_CLI_HEAP_H */
