/* SPDX-License-Identifier: MIT */
/*
 * paths.h - how an object of a LuaJIT heap is reached from a root: the
 * census's reference paths ("_G.cache.sessions").
 *
 * A breadth-first walk from the roots (the globals, the registry, the main
 * thread's stack) over the objects that refer to others: tables (their
 * metatable, array slots, hash keys and values), functions (their
 * environment, a Lua function's upvalues), threads (their environment and
 * stack slots), userdata (metatable, environment); strings and cdata are
 * reached and weighed, and refer to nothing. Prototypes, upvalue objects
 * and traces are not reached (a function's bytes are its own). Each object keeps the
 * first way it was reached, so that its path is a shortest one from the
 * globals and the registry, or else from the main thread's stack; a path
 * is read back from the object to its root.
 */
#ifndef NUPP_PATHS_H
#define NUPP_PATHS_H

#include <stddef.h>
#include <linux/types.h>
#include "heapmem.h"
#include "lj_layout.h"

struct refs;

/* Walk VM g's heap from its roots, over m, expecting about expect objects
 * that refer to others; NULL when out of memory. */
struct refs *refs__walk(struct heapmem *m, const struct lj_layout *lj, __u64 g, size_t expect);

/* obj's path into out ("_G.cache.sessions", "package.loaded.app.cache",
 * "main thread.stack[3].closures[17]"); 0, or -1 when obj was not reached
 * (garbage the collector has not freed yet). */
int refs__path(struct refs *r, __u64 obj, char *out, size_t n);

/* The objects reached grouped by path, where a collection's entries (a
 * table of more than 64 slots, or an array part) make one group: what
 * "_G.cache.sessions[*]" holds, whatever the keys. Each group counts its
 * objects and their own bytes, and retains those of the groups below it:
 * the bytes the collector could free if the path were cut (over the first
 * way each object was reached: shared objects count once, where they were
 * met first). */
#define PATH_ROOT	0xffffffffU
#define PATH_DEPTH_MAX	24		/* segments of a path written; deeper: "..." */

struct path_group {
	__u32 parent;			/* index of the group above it, or PATH_ROOT */
	__u32 depth;			/* its segments, < PATH_DEPTH_MAX */
	char seg[44];			/* its segment: "_G", ".cache", "[*]", ".stack[3]" */
	__u64 objects, bytes;		/* the objects there and their own bytes */
	__u64 retained_objects, retained;	/* with every group's below */
};

struct path_groups {
	struct path_group *g;		/* a group after the one above it */
	size_t n, cap;
};

/* Group r's objects into pg (empty); 0, or -1 out of memory. */
int refs__groups(struct refs *r, struct path_groups *pg);

/* Group i's path into out ("_G.cache.sessions[*]"). */
void path_groups__text(const struct path_groups *pg, size_t i, char *out, size_t n);

void path_groups__free(struct path_groups *pg);

/* Objects reached. */
size_t refs__reached(const struct refs *r);

void refs__free(struct refs *r);

#endif /* NUPP_PATHS_H */
