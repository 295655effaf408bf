/* SPDX-License-Identifier: MIT */
/*
 * paths.h - how an object of a LuaJIT heap is reached from a root: the
 * census's reference paths ("_G.cache.sessions").
 *
 * A breadth-first walk from the roots (the globals, the registry, the main
 * thread's stack) over the objects that refer to others: tables (their
 * metatable, array slots, hash keys and values), functions (their
 * environment, a Lua function's upvalues), threads (their environment and
 * stack slots), userdata (metatable, environment). Each object keeps the
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

/* Walk VM g's heap from its roots, over m; NULL when out of memory. */
struct refs *refs__walk(struct heapmem *m, const struct lj_layout *lj, __u64 g);

/* obj's path into out ("_G.cache.sessions", "package.loaded.app.cache",
 * "main thread.stack[3].closures[17]"); 0, or -1 when obj was not reached
 * (garbage the collector has not freed yet). */
int refs__path(struct refs *r, __u64 obj, char *out, size_t n);

/* Objects reached. */
size_t refs__reached(const struct refs *r);

void refs__free(struct refs *r);

#endif /* NUPP_PATHS_H */
