/* SPDX-License-Identifier: MIT */
/*
 * run.h - one session's state, shared by the files of session/: session.c
 * (the run from start to end: load, wait, poll, live jobs), attach.c (the
 * processes it follows handed to the channels) and finish.c (its end: the
 * files written, what it says).
 */
#ifndef NUPP_RUN_H
#define NUPP_RUN_H

#include <stdbool.h>
#include "channel/channel.h"
#include "launch.h"
#include "options.h"
#include "session_files.h"
#include "targets.h"
#include "top.h"
#include "trace/trace.h"
#include "wake.h"
#include "budget.h"

struct run {
	const struct session_opts *o;
	struct targets targets;		/* -p, or the launched command; then the
					 * processes they started, as found */
	struct launch launched;		/* the launched command; child 0 for -p */
	struct sampler *sampler;	/* NULL when not sampling */
	struct sampler *waits;		/* --wall: the sampler off the CPU, beside it */
	struct tracer *tracer;		/* NULL when not tracing, or not yet */
	struct channel_set channels;	/* the open ones of the two: each step
					 * done to every channel goes through it */
	bool trace_failed;		/* the collector could not attach; said so */
	bool unsupported;		/* the launched command's LuaJIT cannot be used */
	struct session_files files;
	struct top *top;		/* the top command's view, while it runs */
	char err[1024];
	char title[512];		/* what is profiled, as the formats say it */
	double started;
	struct wake wake;		/* when the channels' events wake it (wake.h) */
	struct budget budget;		/* --max-cpu */
	__u64 started_ns;		/* CLOCK_REALTIME then, since the epoch */
};

/* The session's samplers into s: on the CPU, and off it with --wall. How
 * many. */
static inline int run__samplers(const struct run *r, struct sampler *s[2])
{
	int n = 0;

	if (r->sampler)
		s[n++] = r->sampler;
	if (r->waits)
		s[n++] = r->waits;
	return n;
}

static inline bool sampling(const struct run *r)
{
	return r->o->channels & SESSION_SAMPLE;
}

static inline bool tracing(const struct run *r)
{
	return r->o->channels & SESSION_TRACE;
}

void run__release(struct run *r);
int run__attach_target(struct run *r, struct place *pl, bool final);
void run__open_tracer(struct run *r);
bool run__scan_awaited_vms(struct run *r);
void run__say_recording(const struct run *r, const struct place *pl);
int run__check_targets(struct run *r, unsigned tick);
bool run__any_attached(const struct run *r);
int run__finish(struct run *r);

#endif /* NUPP_RUN_H */
