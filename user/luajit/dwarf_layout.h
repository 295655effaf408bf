/* SPDX-License-Identifier: MIT */
/*
 * dwarf_layout.h - struct lj_layout read from a file's DWARF.
 *
 * A LuaJIT built with -g (or its separate debug file) describes its own
 * structs exactly: this reads every field of struct lj_layout from the
 * DWARF types of any such file, whether a full executable or shared library,
 * or the relocatable object of a small probe compiled against a revision's
 * headers (scripts/gen-layouts.py makes the revision table that way).
 */
#ifndef NUPP_DWARF_LAYOUT_H
#define NUPP_DWARF_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include "lj_layout.h"

/* Whether path is an ELF file with a non-empty .debug_info section: a
 * cheap test, before paying for dwarf_layout__read or a debug-file search. */
bool dwarf_layout__present(const char *path);

/* Fill every field of *out from the DWARF of path. 0, or -1 with a
 * one-line reason in err (the first field that cannot be found, by name).
 * A build without the JIT compiler has no jit_State in GG_State: there, and
 * only there, gg_j and the J_* fields are 0 (a JIT build never has gg_j 0). */
int dwarf_layout__read(const char *path, struct lj_layout *out, char *err, size_t errsz);

/* The i-th field of struct lj_layout, in declaration order: its name, and
 * its value in *l (disp2g is signed). NULL past the last field. */
const char *dwarf_layout__field(const struct lj_layout *l, int i, long long *value);

#endif /* NUPP_DWARF_LAYOUT_H */
