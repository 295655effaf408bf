/* SPDX-License-Identifier: MIT */
/*
 * objects.h - what an object of a LuaJIT heap is, and what it weighs.
 *
 * One place for the bytes the collector counts for each type (what lj_gc.c
 * subtracts from g->gc.total when it frees an object), used by the census's
 * counts by type and by its reference paths' retained bytes alike.
 */
#ifndef NUPP_HEAP_OBJECTS_H
#define NUPP_HEAP_OBJECTS_H

#include <linux/types.h>
#include "lj_layout.h"

enum heap_type {
	HEAP_TABLE, HEAP_STRING, HEAP_LUA_FUNCTION, HEAP_C_FUNCTION, HEAP_UPVALUE,
	HEAP_PROTO, HEAP_THREAD, HEAP_USERDATA, HEAP_CDATA, HEAP_TRACE, HEAP_TYPES
};

extern const char *const heap_type_names[HEAP_TYPES];

/* Bytes of an object's header to read for heap_object__weigh: enough for
 * every field of every type. */
__u32 heap_object__header_len(const struct lj_layout *lj);

/* Object o's type and bytes, from its header h (as much of it as its
 * mapping held: at least 64 bytes, or a string's header). GG is the VM's
 * GG_State, whose main thread's lua_State the VM's own bytes count. 0, or
 * 1 when the object does not check (its tag, or a size out of bounds:
 * the heap changed while it was read). */
int heap_object__weigh(const struct lj_layout *lj, __u64 GG, __u64 o, const unsigned char *h,
		       enum heap_type *type, __u64 *bytes);

#endif /* NUPP_HEAP_OBJECTS_H */
