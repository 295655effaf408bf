/* SPDX-License-Identifier: MIT */
/*
 * cfunc_names.h - a name for a C function on a Lua stack that holds in
 * every process.
 *
 * LuaJIT's dumpstack names a C function by its address ("@0x55d0c0a1b2c0",
 * luajit's own pmain among them), which ASLR changes from run to run: two
 * runs of one program never merge in a flame graph. Here it is named from
 * the symbols of the file that holds it ("pmain"), or where the file has
 * none for it, by the file and its address there ("luajit+0x1a2b0", the
 * ELF address addr2line and a debug file take). An address in no file
 * (JIT-made code, an FFI callback) keeps dumpstack's form.
 */
#ifndef NUPP_CFUNC_NAMES_H
#define NUPP_CFUNC_NAMES_H

#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

struct cfunc_names;

struct codemap;

/* The C functions of process pid, whose code mappings maps knows (shared,
 * not owned: the caller ages it at each poll); NULL when out of memory. */
struct cfunc_names *cfunc_names__new(pid_t pid, struct codemap *maps);
void cfunc_names__free(struct cfunc_names *c);

/* The name of the C function at addr, "" when addr lies in no file of the
 * process; valid until the next call. */
const char *cfunc_names__name(struct cfunc_names *c, __u64 addr);

#endif
