/* SPDX-License-Identifier: MIT */
/* heap.h - nupp-bpf heap -p PID [--json] [--pause]: a census of the heap of
 * every VM of a process (heap/census.h), on stdout. */
#ifndef NUPP_CLI_HEAP_H
#define NUPP_CLI_HEAP_H

#include <stdbool.h>
#include <sys/types.h>

/* The command's exit status: 0, or 1 with the error said. */
int heap__run(pid_t pid, bool json, bool pause);

#endif /* NUPP_CLI_HEAP_H */
