/* SPDX-License-Identifier: MIT */
/*
 * abort_site.h - the fields of a trace abort's site (profile.AbortSite):
 * location, reason and its identity, blacklisting, zone path, each derived
 * from the probe's event (bpf/trace_abi.h) as the target's jit.v would.
 */
#ifndef NUPP_ABORT_SITE_H
#define NUPP_ABORT_SITE_H

#include <stdbool.h>
#include <sys/types.h>
#include "luajit/lj_build.h"
#include "luajit/symbolize.h"
#include "trace_abi.h"
#include "trace_reasons.h"

#define ABORT_SITE_TEXT_MAX	(4096 + 64)	/* a location or reason */
#define ABORT_SITE_ZONE_MAX	1024		/* zone_state.h NUPP_ZONE_PATH_MAX */

/* The process an event came from. */
struct abort_source {
	const struct lj_build *b;
	pid_t pid;
	struct symbolizer *sym;		/* lines, as the sampler finds them */
	__u64 zone_state;		/* &nupp_zone_state in the target, 0 none */
};

struct abort_reason {
	char raw[ABORT_SITE_TEXT_MAX];		/* jit.v's text */
	char reason[2 * ABORT_SITE_TEXT_MAX];		/* with opcode / IR names */
	char id[256];
	const char *cls;
	const struct trace_reason *row;	/* NULL: not in the catalog */
	int err;			/* TraceError, -1 for an error object */
};

/* jit.v's location of the abort: "file.lua:42", a builtin's name, "(?)". */
void abort_site__location(const struct abort_source *src, const struct nupp_trace_event *e,
			  char *out, size_t outsz);

/* lj_debug_pushloc(): what jit.util.funcinfo(fn, pos).loc holds for a
 * prototype pt (its address, for a long chunk name) whose first line is
 * first, at line, for the chunk name of length len whose first character
 * is name0 and whose bytes from offset off on are name (NUL-terminated).
 * -1 when those bytes do not hold what the location shows. */
int abort_site__fmt_loc(__u64 pt, __s32 first, int line, char name0, const char *name, size_t off,
			size_t len, char *out, size_t outsz);

/* Its catalog row alone (NULL when not in the catalog): what decides
 * whether the abort is counted, without the texts. */
const struct trace_reason *abort_site__row(const struct abort_source *src,
					   const struct nupp_trace_event *e);

/* Its reason, raw text, identity and catalog row. */
void abort_site__reason(const struct abort_source *src, const struct nupp_trace_event *e,
			struct abort_reason *r);

/* Did it blacklist its start bytecode? */
bool abort_site__blacklisted(const struct abort_source *src, const struct nupp_trace_event *e);

/* The zone path open when it happened ("" none). */
void abort_site__zone_path(const struct abort_source *src, __u32 id, char *out, size_t outsz);

/* jit/v.lua fmtfunc(fn, pos) of a function in the target, read now. */
void abort_site__fmtfunc(const struct abort_source *src, __u64 fn, __s32 pos, char *out,
			 size_t outsz);

#endif
