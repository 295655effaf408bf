/* SPDX-License-Identifier: MIT */
/*
 * lj_derive.h - a LuaJIT build nupp-bpf has not seen before.
 *
 * The registry (lj_build.h) knows a few builds byte for byte. Any other
 * x86-64 LuaJIT 2.1 is described from what it says of itself: its version
 * string and exports name its source revision, which picks struct layouts
 * and jit.vmdef tables from the revision table (lj_revision.h, generated
 * from real compiles of every revision); DWARF, when the build or its debug
 * file carries it, gives the layout exactly; the code sites come from its
 * symbols or its machine code (code_sites.h). Nothing here is trusted yet:
 * the layout candidates are checked against the live VM (lj_target.c) and
 * every probe address is decoded again before it is placed.
 */
#ifndef NUPP_LJ_DERIVE_H
#define NUPP_LJ_DERIVE_H

#include <stdbool.h>
#include "code_sites.h"
#include "elf_file.h"
#include "lj_revision.h"

#define LJ_DERIVE_MAX_CANDS 8

/* What the build says it is: luajit.h's LUAJIT_VERSION, as jit.version. */
struct lj_version {
	int minor;		/* 1 for 2.1, 0 for 2.0; -1: no version string */
	__u64 rolling;		/* a rolling build's commit time, 0 for 2.1.0-betaN */
	char text[48];		/* "LuaJIT 2.1.1737090214" */
};

/* A layout to try against the live VM, and the revision it comes from. */
struct lj_candidate {
	const struct lj_layout *layout;
	const struct lj_revision *rev;	/* gives the vmdef tables */
	const char *from;		/* "DWARF", "revision table" */
};

struct lj_derived {
	struct lj_version version;
	const char *fork;		/* "luajit2" (OpenResty) or "luajit" (upstream) */
	struct lj_candidate cands[LJ_DERIVE_MAX_CANDS];
	int ncands;			/* most likely first */
	struct lj_layout dwarf;		/* the build's own, when has_dwarf */
	bool has_dwarf;
	bool dwarf_in_table;		/* and the table's for its revision is the same */
	bool has_jit;			/* built with the JIT compiler */
	char options[96];		/* options that move fields, "LUAJIT_DISABLE_FFI" */
	struct lj_code_sites sites;	/* ELF vaddrs */
	const char *sites_from;		/* "symbols" or "machine code" */
};

/* Describe the LuaJIT in ELF file path (opened as ef). root is the target's
 * root directory ("/proc/PID/root"), where its debug files are looked for.
 * 0, or -1 with a one-line reason in err naming the build and what would
 * help (without the "nupp-bpf: error: " prefix). */
int lj_derive(struct elf_file *ef, const char *path, const char *shown, const char *root,
	      struct lj_derived *d, char *err, size_t errsz);

/* The build's separate debug file under root (its -dbgsym package's place,
 * /usr/lib/debug/.build-id/xx/rest.debug), when there is one. */
bool lj_derive__debug_file(struct elf_file *ef, const char *root, char *out, size_t outsz);

/* Whether ef is an x86-64 ELF64 file; else false with a one-line reason. */
bool lj_derive__machine_ok(struct elf_file *ef, const char *shown, char *err, size_t errsz);

/* The version string of ef; v->minor is -1 when there is none. */
void lj_derive__version(struct elf_file *ef, struct lj_version *v);

/* The same in data[0..n) (a section's bytes): true when it is there, with
 * *v filled in; *v untouched when not. */
bool lj_derive__version_in(const char *data, size_t n, struct lj_version *v);

#endif /* NUPP_LJ_DERIVE_H */
