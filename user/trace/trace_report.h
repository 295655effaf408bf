/* SPDX-License-Identifier: MIT */
/*
 * trace_report.h - a trace-abort report and what it is made of: the sites
 * aborts add up to (profile.AbortSite), their order, the recorder's
 * identity (profile.TraceProfile), and the report written as CSV. The
 * collector (trace.h) fills it; the session's files, the summary, top and
 * the Lua module read it.
 */
#ifndef NUPP_TRACE_REPORT_H
#define NUPP_TRACE_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>
#include "luajit/lj_target.h"

#define TRACER_MAX_FEATURES 24

/* profile.TraceProfile: the recorder configuration of one target. */
struct trace_profile {
	char id[512];			/* every field below joined by '|', as nupp.profile.trace does */
	char luajit_revision[128];	/* registry package, or "external:<file>" */
	long long luajit_version;	/* snapshot date from the package version, 0 unknown */
	char architecture[16];		/* jit.arch: "x64" */
	char operating_system[16];	/* jit.os: "Linux" */
	const char *features[TRACER_MAX_FEATURES];	/* jit.status names, sorted */
	int nfeatures;
	char bytecode_schema[32];	/* FNV-1a 32 of jit.vmdef.bcnames, 8 hex digits */
	bool supported;			/* a registry build the catalog was written for */
};

/* profile.AbortSite */
struct trace_site {
	const char *severity;		/* "blacklist", "warn" or "info" */
	unsigned long long count;
	char *reason;			/* traceerr text, opcode/IR names substituted; it
					 * owns the block of the four strings below too */
	char *reason_id;		/* catalog id, ".NAME" appended for NYI details */
	const char *reason_class;	/* "blocker", "risk" or "stop" */
	char *raw_reason;		/* the VM's text as jit.v prints it */
	char *location;			/* "chunk:line" as jit.v prints it */
	char *zone_path;		/* "" when no zone was open */
};

/* profile.TraceReport */
struct trace_report {
	double duration_sec;		/* wallclock seconds since tracer__open */
	unsigned long long total_aborts;	/* events counted (benign ones only if asked) */
	unsigned long long blacklisted;	/* blacklist events among them */
	struct trace_site *sites;	/* by severity, then count desc */
	size_t nsites;
	struct trace_profile profile;	/* of the first target */
	const char *catalog_id;
	int catalog_version;
	unsigned long long lost;	/* events the probe could not deliver */
};

/* Give s its five strings, copied into one block that s->reason owns. 0, or
 * -ENOMEM with all five NULL. */
int trace_site__set_strings(struct trace_site *s, const char *reason, const char *reason_id,
			    const char *raw_reason, const char *location, const char *zone_path);
void trace_site__free(struct trace_site *s);

/* The order of a report's sites (qsort): by severity, then count
 * descending, then reason, location and zone path, as nupp.profile.trace's
 * siteOrder orders them (tests/fixtures/trace_sites.tsv holds both to it). */
int trace_site__cmp(const void *a, const void *b);

void trace_report__free(struct trace_report *r);

/* sites as RFC 4180 CSV: header line, CRLF line ends. 0 or -errno. */
int trace_report__write_csv(const struct trace_report *r, FILE *f);

/* The TraceProfile of a target; jit_flags is J->flags (the collector reads
 * it when it attaches). */
void trace_profile__fill(const struct lj_target *t, __u32 jit_flags, struct trace_profile *out);

#endif /* NUPP_TRACE_REPORT_H */
