/* SPDX-License-Identifier: MIT */
/*
 * lj_recorder.h - what the trace recorder of a LuaJIT revision refuses.
 *
 * Generated (build/gen/lj_recorders.c) from luajit/recorders.json, which
 * scripts/gen-recorders.py derives from the sources of every revision of
 * upstream LuaJIT 2.1 and OpenResty's luajit2 where the recorder's files
 * changed, and from the Debian source packages: the builtins' handlers as
 * buildvm writes lj_recdef.h, lj_ffrecord.c's fallbacks to recff_nyi, and
 * lj_record.c's NYI bytecodes. `nupp-bpf check` reads it. See
 * kernel-notes/recorder.md.
 */
#ifndef NUPP_LJ_RECORDER_H
#define NUPP_LJ_RECORDER_H

#include <stddef.h>
#include <linux/types.h>

struct lj_target;

enum lj_rec_kind {
	LJ_REC_COMPILED,	/* its handler records every call */
	LJ_REC_PARTIAL,		/* its handler falls back to recff_nyi for some arguments */
	LJ_REC_NYI,		/* no handler: recff_nyi (stitch, or stop/abort) */
	LJ_REC_ABORTS,		/* its handler aborts (NYIFFU) for some arguments */
};

struct lj_rec_builtin {
	const char *name;	/* jit.vmdef.ffnames: "string.format" */
	int kind;		/* enum lj_rec_kind */
};

struct lj_recorder {
	const struct lj_rec_builtin *builtins;	/* in ffid order, from ffid 2 */
	int nbuiltins;
	const char *const *nyi_bytecodes;	/* lj_record_ins' NYIBC, NULL-terminated */
	int varg_multi_nyi;	/* rec_varg refuses VARG of all values at the base frame */
	int stitch;		/* recff_nyi stitches (2.1) */
	int nyi_aborts;		/* recff_nyi aborts with NYIFFU (2.0) */
	const char *const *nostitch_ops;	/* no stitch when the call's next op is one */
	const char *const *nostitch_builtins;	/* never stitched across */
	int minstitch;		/* default -Ominstitch: shorter stitched traces abort */
	int builtin_abort_at_caller;	/* a handler's abort is located at its Lua caller
					 * (else at the builtin, as jit.v names it) */
	int hot_iterations;	/* a loop is recorded after this many iterations */
};

/* A revision where the recorder's sources changed, or a Debian tree. */
struct lj_recorder_row {
	const char *fork;	/* "luajit", "luajit2"; "" for a Debian tree */
	const char *commit;	/* "" for a Debian tree */
	__u64 time;		/* committer time */
	const char *source;	/* "debian bookworm luajit 2.1.0~..." or "" */
	int recorder;		/* index into lj_recorders */
};

extern const struct lj_recorder lj_recorders[];
extern const struct lj_recorder_row lj_recorder_rows[];
extern const int lj_nrecorder_rows;

/* The recorder of an identified build, and in desc which revision it was
 * taken from. NULL, with the reason in desc, when the revision is unknown. */
const struct lj_recorder *lj_recorder__of(const struct lj_target *t, char *desc, size_t descsz);

/* The kind of a builtin by name, -1 when the build has none of that name. */
int lj_recorder__builtin(const struct lj_recorder *r, const char *name);

#endif
