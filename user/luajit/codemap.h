/* SPDX-License-Identifier: MIT */
/*
 * codemap.h - which file of a process a code address comes from.
 *
 * A C function on a Lua stack is known by its address alone. pprof places
 * such an address in a Mapping (the file mapped there, its range and file
 * offset), which is what lets it name the function from the file's symbols
 * later. A process's file-backed executable mappings are read from
 * /proc/PID/maps when first needed, and read again when an address falls
 * in none of them (the process loaded a library since), at most once per
 * codemap__age: a C function in anonymous memory (a JIT's, an FFI
 * callback's) must not cost a read of the maps at every stack it is on.
 */
#ifndef NUPP_CODEMAP_H
#define NUPP_CODEMAP_H

#include <sys/types.h>
#include <linux/types.h>

struct code_mapping {
	__u64 start, limit;	/* the address range */
	__u64 off;		/* file offset of start */
	char *file;		/* as /proc/PID/maps names it */
};

struct codemap;

/* A map of process pid's code; NULL when out of memory. */
struct codemap *codemap__new(pid_t pid);
void codemap__free(struct codemap *m);

/* The mapping that holds addr, NULL when none does (or the maps could not
 * be read). Valid until the next call. */
const struct code_mapping *codemap__find(struct codemap *m, __u64 addr);

/* Allow one more read of the maps on a miss (call at each poll). */
void codemap__age(struct codemap *m);

#endif /* NUPP_CODEMAP_H */
