// SPDX-License-Identifier: MIT
/* finish.c - a session's end: its profile and report written, its summary said (run.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/privileges.h"
#include "base/procmem.h"
#include "base/say.h"
#include "base/util.h"
#include "run.h"
#include "summary.h"
#include "zones/zones.h"

/* What the formats say the profile is of: the title, when and how long. */
static void describe_profile(struct run *r, struct profile *p)
{
	profile__set_title(p, r->title);	/* none, when out of memory */
	p->time_ns = r->started_ns;
	p->duration_ns = (monotonic_s() - r->started) * 1e9;
}

/* Whether a session that counted no sample was blind rather than idle: its
 * targets ran long enough on the CPU to be sampled 30 times (a Poisson count
 * of mean 30 is 0 once in 10^13). Samples that match no target (ids of
 * another PID namespace, say) must not pass for an idle program's empty
 * profile. */
static bool blind(const struct run *r, const struct sampler_stats *st)
{
	double cpu_s = 0, period_s = sampler__period_ns(r->sampler) * 1e-9;
	long hz = sysconf(_SC_CLK_TCK);

	/* Off the CPU, a program that ran without waiting waited for nothing;
	 * one that allocated less than the mean may well have no sample. */
	if (st->samples || period_s <= 0 || hz <= 0 || sampler__off_cpu(r->sampler) ||
	    sampler__alloc(r->sampler))
		return false;
	for (int i = 0; i < r->targets.n; i++) {
		const struct place *pl = r->targets.places[i];

		if (pl->attached)
			cpu_s += (double)(pl->cpu_seen - pl->cpu_attached) / hz;
	}
	if (cpu_s < 30 * period_s)
		return false;
	say__error("no sample was taken while the profiled processes ran %.2f s on the CPU "
		       "(the kernel's samples named no process nupp-bpf attached to)", cpu_s);
	return true;
}

/* Samples: every file of the profile, in its format, and the summary. */
static int finish_samples(struct run *r)
{
	struct profile p = {};
	struct sampler_stats st;
	int ret = 0;

	if (sampler__take(r->sampler, &p, &st)) {
		say__error("out of memory while collecting samples");
		profile__free(&p);
		return 1;
	}
	describe_profile(r, &p);
	ret |= session_files__write_profile(&r->files, &p, &r->o->render);
	if (r->o->summary)
		summary__samples(&p, &r->o->render, &st, monotonic_s() - r->started,
				 r->o->sampler.depth);
	ret |= blind(r, &st);
	/* Last: the file takes the counts since the last rotation. */
	if (r->files.rotate && rotate__finish(r->files.rotate, &p, st.weight, r->err,
						   sizeof(r->err))) {
		say__error("%s", r->err);
		ret = 1;
	}
	profile__free(&p);
	return ret;
}

/* --wall: the samplers' two profiles made one in microseconds, a sample
 * counting for its period and a wait for its time; each half said in the
 * summary as record and --off-cpu say it, then their split. */
static int finish_wall(struct run *r)
{
	struct profile cpu = {}, waits = {}, wall = {};
	struct sampler_stats on, off;
	__u64 period = sampler__period_ns(r->sampler), us[2] = { 0, 0 };
	double seconds = monotonic_s() - r->started;
	int ret = 0;

	if (sampler__take(r->sampler, &cpu, &on) || sampler__take(r->waits, &waits, &off) ||
	    profile__add_scaled(&wall, &cpu, period, 1000) ||
	    profile__add_scaled(&wall, &waits, 1, 1)) {
		say__error("out of memory while collecting samples");
		ret = 1;
		goto out;
	}
	wall.measure = PROFILE_WALL;
	wall.period_ns = 1000;
	describe_profile(r, &wall);
	ret |= session_files__write_profile(&r->files, &wall, &r->o->render);
	if (r->o->summary) {
		summary__samples(&cpu, &r->o->render, &on, seconds, r->o->sampler.depth);
		summary__samples(&waits, &r->o->render, &off, seconds, r->o->sampler.depth);
		for (size_t i = 0; i < wall.nrows; i++)
			if (profile_row__kept(&wall.rows[i], &r->o->render))
				us[wall.rows[i].off_cpu] += profile_row__count(&wall.rows[i]);
		fprintf(stderr, "  wall-clock: %.3f s on the CPU (samples × %.3g ms), %.3f s off it\n",
			us[0] / 1e6, period / 1e6, us[1] / 1e6);
	}
	ret |= blind(r, &on);
out:
	profile__free(&cpu);
	profile__free(&waits);
	profile__free(&wall);
	return ret;
}

/* Trace aborts: the CSV and the summary. */
static int finish_trace(struct run *r)
{
	struct trace_report rep;
	int ret;

	if (!r->tracer) {
		session_files__write_csv(&r->files, NULL);	/* empty: nothing collected */
		return r->trace_failed && !sampling(r);
	}
	if (tracer__report(r->tracer, &rep)) {
		say__error("out of memory while collecting trace aborts");
		return 1;
	}
	ret = session_files__write_csv(&r->files, &rep);
	if (r->o->summary)
		summary__trace(&rep);
	trace_report__free(&rep);
	return ret;
}

int run__finish(struct run *r)
{
	int ret = 0;

	if (r->waits)
		ret |= finish_wall(r);
	else if (r->sampler)
		ret |= finish_samples(r);
	if (tracing(r))
		ret |= finish_trace(r);
	if (!r->o->summary)
		return ret;
	for (int i = 0; i < r->targets.n; i++) {
		const struct place *pl = r->targets.places[i];

		if (pl->exited && !pl->execed && !r->launched.child && !place_is_child(pl) &&
		    procmem__start_time(pl->pid) != pl->start)	/* not one left out */
			say__note("note: PID %d exited during the session; what it did until then is kept",
			     pl->pid);
	}
	if (r->launched.child && !run__any_attached(r) && r->targets.n == 1)
		say__note("note: %s never loaded LuaJIT", r->o->argv[0]);
	else if (r->launched.child && !run__any_attached(r))
		say__note("note: neither %s nor the %d processes it started loaded LuaJIT", r->o->argv[0],
		     r->targets.n - 1);
	session_files__say_written(&r->files, r->o, r->tracer != NULL);
	return ret;
}
