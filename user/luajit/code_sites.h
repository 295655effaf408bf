/* SPDX-License-Identifier: MIT */
/*
 * code_sites.h - where nupp-bpf's uprobes go in a LuaJIT build, read from
 * the build's own machine code.
 *
 * Three sites matter: the interpreter blob (the sampler's BASE register is
 * valid only there), the entry of lj_gc_separateudata (one hit per GC cycle
 * retires the sampler's walk caches) and the conditional jump on
 * J->cur.traceno in trace_abort() (one hit per trace abort). A stripped build
 * we have never seen keeps its .eh_frame (function bounds) and its exported
 * lua_* API; from those the sites are found by decoding instructions, and an
 * address is checked again with code_sites__verify() before it may become a
 * uprobe. The same code tells facts of the build: whether it is GC64, and
 * whether a layout (struct offsets) fits it.
 */
#ifndef NUPP_CODE_SITES_H
#define NUPP_CODE_SITES_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include "lj_layout.h"

#define CODE_SITES_MAX_COPIES	4

struct lj_code_sites {
	__u64 vm_lo, vm_hi;	/* interpreter blob, ELF vaddrs */
	__u64 gc_cycle;		/* lj_gc_separateudata entry, 0 when not found */
	__u64 abort_site;	/* the jcc on J->cur.traceno in trace_abort, 0 when not found */
	int abort_j_reg;	/* J's register at abort_site by its DWARF number
				 * (code_sites__reg_name), -1 unknown */
	/* Further copies of that jcc, in address order: a compiler may copy
	 * the test into the paths that lead to it (gcc 12 -O2 does, for the
	 * LJ_TRERR_RETRY path). An abort passes one of abort_site and these. */
	__u64 abort_more[CODE_SITES_MAX_COPIES - 1];
	int abort_nmore;
	char gc_why[160], abort_why[160];	/* why a site is 0: one line */
};

/* Find the sites in the ELF file at path (a LuaJIT executable, library, or a
 * program linking LuaJIT statically). lj gives J_cur_traceno, J_cur_link and
 * J_cur_linktype. 0, or -1 with a one-line reason (the interpreter blob not
 * found: the file is not usable at all). */
int code_sites__find(const char *path, const struct lj_layout *lj, struct lj_code_sites *out,
		     char *err, size_t errsz);

/* code_sites__find, with CODE_SITES_FULL_SCAN: the trace-abort site and
 * the GC's calls are looked for in every function of the file, not only
 * along the calls from the interpreter (4-5 times slower; the tests check
 * that both ways agree). */
#define CODE_SITES_FULL_SCAN	1
int code_sites__find_opts(const char *path, const struct lj_layout *lj, int flags,
			  struct lj_code_sites *out, char *err, size_t errsz);

#define CODE_SITE_FUNC_ENTRY	1	/* vaddr starts an .eh_frame FDE */
#define CODE_SITE_TRACENO_JCC	2	/* the jcc on J->cur.traceno, as found above */

/* Before any uprobe: is vaddr an instruction boundary (reached by linear
 * decoding from the start of the FDE that covers it) holding the expected
 * instruction (kind)? 0 when verified, -1 with a one-line reason. A site
 * verified before in this process, in the same file and with the same
 * layout, is not decoded again. */
int code_sites__verify(const char *path, __u64 vaddr, int kind, const struct lj_layout *lj,
		       char *err, size_t errsz);

/* Where a uprobe on every call of the function at vaddr (an FDE's start)
 * costs least: the first instruction on the straight path from its entry
 * that the kernel emulates (a direct jcc, jmp or call, a push of a
 * register) rather than single-steps out of line (~3x the cost here,
 * kernel-notes/alloc.md), when every instruction before it only compares
 * or loads registers other than rsp and the argument registers, and no
 * jump lands on any of them: there the function's arguments and its
 * return address are still as at the entry. The entry itself when there is
 * none. 0 with the site in *site, or -1 with a one-line reason. */
int code_sites__entry_probe(const char *path, __u64 vaddr, const struct lj_layout *lj,
			    __u64 *site, char *err, size_t errsz);

/* What the code says of the build itself. */

/* Is the LuaJIT in the file a GC64 build (LJ_GC64: 64-bit TValues whose
 * type is their top 17 bits, 47-bit GC pointers)? 1 when it is, 0 when its
 * GC refs are 32-bit (built with LUAJIT_DISABLE_GC64, an x64 2.1 from
 * before GC64 was the default, 2.0), -1 when the code cannot tell; why (when
 * given) says which functions showed what, in one line. */
int code_sites__gc64(const char *path, char *why, size_t whysz);

/* The distinct displacements of the [reg + disp] memory operands (lea
 * included; rsp- and rip-relative ones left out) of the exported function
 * func, decoded from its FDE start to its end: its own blocks, not its
 * callees'. The first max, in ascending order, go to disps; returns how many
 * there are (possibly more than max), or -1 when the file, the export, its
 * FDE or its code cannot be read. */
int code_sites__offsets_used(const char *path, const char *func, __s64 *disps, int max);

/* Does the layout lj fit the build's code? true unless the code proves a
 * field wrong (user/luajit/code_sites.c, "the layout" says what is checked), or
 * the build is not GC64. A file that cannot be read proves nothing. */
bool code_sites__layout_fits(const char *path, const struct lj_layout *lj);

/* The same, with why (when given) saying what was checked, or what the code
 * shows instead, in one line. */
bool code_sites__layout_check(const char *path, const struct lj_layout *lj, char *why, size_t whysz);

/* "r15" for CODE_SITE_R15, "?" for anything else. */
const char *code_sites__reg_name(int reg);

#endif /* NUPP_CODE_SITES_H */
