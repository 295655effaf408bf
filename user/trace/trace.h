/* SPDX-License-Identifier: MIT */
/*
 * trace.h - the trace-abort collector (nupp-bpf trace): its BPF probes on
 * LuaJIT's trace_abort(), their events, the sites they add up to.
 *
 * Open it, add the LuaJIT targets, poll while they run, then take a report:
 *
 *	struct tracer *tr = tracer__open(&opts, err, sizeof(err));
 *	tracer__add_target(tr, &target, zones, err, sizeof(err));	// and _remove_target
 *	while (running)
 *		tracer__poll(tr, 100);
 *	struct trace_report r;
 *	tracer__report(tr, &r);
 *	trace_report__write_csv(&r, stdout);
 *	trace_report__free(&r);
 *	tracer__close(tr);
 *
 * Sites are what profile.trace reports (profile.AbortSite in the API); the
 * reasons are mapped through the catalog in catalog/trace-reasons.tsv.
 */
#ifndef NUPP_TRACE_API_H
#define NUPP_TRACE_API_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include "luajit/lj_target.h"
#include "trace_report.h"
#include "zones/zones.h"

struct tracer;

struct tracer_opts {
	bool include_benign;	/* count the 'stop' class too */
};

/* Load the collector; its targets come with tracer__add_target (the shape
 * of sampler.h: open, add, gone). NULL with a one-line reason in err. */
struct tracer *tracer__open(const struct tracer_opts *o, char *err, size_t errsz);

/* The collector as one channel of a session (channel/channel.h); NULL for NULL. */
struct channel *tracer__channel(struct tracer *tr);

/* Attach to a target (opened with lj_target__open; it must outlive the
 * tracer), its aborts carrying the zone path open in z (NULL: none) from
 * the first; the first target's build makes the report's profile. 0, or -1
 * with a reason in err. */
int tracer__add_target(struct tracer *tr, const struct lj_target *t, struct zones *z,
		       char *err, size_t errsz);

/* t's process exited: its events so far are taken in, and a process that
 * gets the pid next is not taken for it. */
void tracer__remove_target(struct tracer *tr, const struct lj_target *t);

/* Did the process of pid execute another program since it was added? The
 * kernel dropped its entry then (on_exec in bpf/trace.bpf.c). When it did,
 * it is removed as by tracer__remove_target and its probe is detached: the pid
 * can be added again. */
bool tracer__target_execed(struct tracer *tr, pid_t pid);

/* The zone module of target t, found (or found again) after it was added:
 * its aborts carry the zone path open when they happened. 0 or -errno. */
int tracer__set_zones(struct tracer *tr, const struct lj_target *t, struct zones *z);

/* Consume pending events, waiting up to timeout_ms; returns events read or
 * -errno. Call it often enough that aborted functions are still alive. */
int tracer__poll(struct tracer *tr, int timeout_ms);

/* A descriptor that polls readable when an abort comes (the probe wakes the
 * ring when it had been read empty): wait on it, then tracer__poll. */
int tracer__fd(const struct tracer *tr);

/* Stop or resume counting; the probes stay attached. */
void tracer__pause(struct tracer *tr, bool paused);

/* The report so far (polls once first). 0 or -ENOMEM; free with
 * trace_report__free (trace_report.h). */
int tracer__report(struct tracer *tr, struct trace_report *out);

/* The probe's counters (enum nupp_trace_counter in bpf/trace_abi.h). 0 or -errno. */
int tracer__counters(struct tracer *tr, __u64 *out);

void tracer__close(struct tracer *tr);

/* Where the probes go in a build: every copy of the "if (traceno)" jcc of
 * trace_abort(), as ELF vaddrs of the target's file, each verified by
 * decoding; how many (at most max), or 0 and a reason in err. */
int tracer__sites(const struct lj_target *t, __u64 *out, int max, char *err, size_t errsz);

#endif /* NUPP_TRACE_API_H */
