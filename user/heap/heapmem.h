/* SPDX-License-Identifier: MIT */
/*
 * heapmem.h - a process's heap, copied whole, for a census to read.
 *
 * Objects are read all over the heap, strings in the order of their hash:
 * one read each would cost a system call each (13 s for 185 MB here). The
 * anonymous mappings, where LuaJIT's allocator and the C library's keep
 * the heap, are copied first, each in one read, and the census reads the
 * copy. That takes as much memory as the heap: past half the memory
 * available, or for what no copy holds, objects are read from the process
 * one by one.
 */
#ifndef NUPP_HEAPMEM_H
#define NUPP_HEAPMEM_H

#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>
#include "base/procmem.h"

struct region {
	__u64 lo, hi;
	unsigned char *data;
};

struct heapmem {
	pid_t pid;
	struct region *r;	/* by address */
	size_t n, cap;
	__u64 copied;		/* bytes */
};

/* Copy pid's heap mappings into m; 0, or -1 out of memory. */
int heapmem__init(struct heapmem *m, pid_t pid);
void heapmem__free(struct heapmem *m);

/* The index in m->r of the region of the copy holding addr, or -1. */
long heapmem__region(const struct heapmem *m, __u64 addr);

/* The n bytes at addr in the copy, read in place (no copy of them: a census
 * reads millions of headers); NULL when the copy does not hold them all. */
const unsigned char *heapmem__view(const struct heapmem *m, __u64 addr, size_t n);

/* n bytes at addr, from the copy or else from the process; 0 or -errno. */
int heapmem__read(struct heapmem *m, void *dst, size_t n, __u64 addr);

#endif /* NUPP_HEAPMEM_H */
