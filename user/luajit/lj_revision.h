/* SPDX-License-Identifier: MIT */
/*
 * lj_revision.h - struct layouts and jit.vmdef tables by LuaJIT source revision.
 *
 * The build registry (lj_build.h) knows a few binaries byte for byte; this
 * table knows source revisions. It is generated (build/gen/lj_revisions.c)
 * from luajit/revisions.json, which scripts/gen-layouts.py makes by
 * compiling the headers of every revision of upstream LuaJIT 2.1 and of
 * OpenResty's luajit2 where a header nupp-bpf reads changed, plus the Debian
 * source packages. A row is the first revision of a run of revisions that
 * share their layout and tables: a rolling build that prints "LuaJIT 2.1.T"
 * is described by the newest row of its fork with time <= T. See
 * kernel-notes/layouts.md.
 */
#ifndef NUPP_LJ_REVISION_H
#define NUPP_LJ_REVISION_H

#include <linux/types.h>
#include "lj_layout.h"
#include "lj_build.h"

/* What the symbolizer needs to name things, as jit.vmdef has it. */
struct lj_vmdef {
	const char *const *ffnames;	/* by ffid */
	int nffnames;
	const char *const *bcnames;	/* by opcode */
	int nbcnames;
	const char *const *irnames;	/* by IR op */
	int nirnames;
	const char *const *traceerr;	/* by TraceError */
	int ntraceerr;
	const struct lj_bcmode *bcmode;	/* by opcode, nbcnames entries */
	const char *const *mmnames;	/* "__index" ..., by MMS */
	int nmmnames;
	int bcm_base, bcm_dst;		/* values of BCMbase and BCMdst */
	int mm_call, mm_max;		/* values of MM_call and MM__MAX */
};

/* The layout of a build made with options that change it (LUAJIT_DISABLE_JIT:
 * no jit_State, so gg_j and the J_* fields are 0, and disp2g differs). */
struct lj_layout_variant {
	const char *options;		/* "LUAJIT_DISABLE_FFI LUAJIT_DISABLE_JIT" */
	const struct lj_layout *layout;
};

struct lj_revision {
	const char *fork;		/* "luajit" (upstream) or "luajit2" (OpenResty) */
	const char *commit;		/* full hash, NULL for a Debian source package */
	__u64 time;			/* committer time: a rolling build prints 2.1.<time> */
	const char *source;		/* "git", or "debian trixie luajit 2.1.0+openresty20250117-2" */
	const char *version;		/* what `luajit -v` prints, "LuaJIT 2.1.0-beta3" */
	const struct lj_layout *layout;	/* of an x86-64 GC64 build */
	const struct lj_vmdef *vmdef;
	int gc64, dualnum;		/* x86-64 defaults of the revision's lj_arch.h */
	const struct lj_layout_variant *variants;	/* by option set, NULL if none */
	int nvariants;
};

/* Sorted by fork, then time. */
extern const struct lj_revision lj_revisions[];
extern const int lj_nrevisions;
/* SHA-256 (hex) of the table as generated and of bpf/lj_layout.h. */
extern const char lj_revisions_digest[];

#endif /* NUPP_LJ_REVISION_H */
