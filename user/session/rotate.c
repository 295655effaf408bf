// SPDX-License-Identifier: MIT
/* rotate.c - one profile file per interval, the oldest removed (rotate.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include "profile/interval.h"
#include "base/output.h"
#include "rotate.h"
#include "base/util.h"

struct rotate {
	struct rotate_opts o;
	struct interval iv;
	double t0;			/* the interval's start, CLOCK_MONOTONIC s */
	__u64 t0_ns;			/* the same, CLOCK_REALTIME ns since the epoch */
	double cpu0;			/* nupp-bpf's own CPU seconds then */
	unsigned written;
	char (*names)[PATH_MAX];	/* the last o.keep files written, a ring */
};

struct rotate *rotate__open(const struct rotate_opts *o, char *err, size_t errsz)
{
	struct rotate *rt;
	struct stat st;

	errno = 0;
	if (stat(o->dir, &st) || !S_ISDIR(st.st_mode) || access(o->dir, W_OK | X_OK)) {
		snprintf(err, errsz, "--rotate: cannot write files in %s: %s", o->dir,
			 errno ? strerror(errno) : "not a directory");
		return NULL;
	}
	rt = calloc(1, sizeof(*rt));
	if (rt && o->keep && !(rt->names = calloc(o->keep, sizeof(*rt->names)))) {
		free(rt);
		rt = NULL;
	}
	if (!rt) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	rt->o = *o;
	return rt;
}

void rotate__start(struct rotate *rt)
{
	rt->t0 = monotonic_s();
	rt->t0_ns = realtime_ns();
	rt->cpu0 = own_cpu_s();
}

/* What the interval cost, for the file to say (a fleet watches it): its
 * samples, nupp-bpf's own CPU over it (its BPF programs' time is the
 * targets'; docs/benchmarks.md measures it), and the rate --max-cpu
 * lowered sampling to, when it did (weight, sampler__slow_down). */
static int say_cost(struct profile *p, double seconds, double cpu, unsigned weight)
{
	char text[256], lowered[80] = "";
	__u64 samples = 0;

	for (size_t i = 0; i < p->nrows; i++)
		samples += profile_row__count(&p->rows[i]);
	if (weight > 1)
		snprintf(lowered, sizeof(lowered), "; sampling at 1/%u of the rate, each counting for %u",
			 weight, weight);
	snprintf(text, sizeof(text), "nupp-bpf: %llu samples; its own CPU %.3f s over %.3f s (%.2f%% of a core)%s",
		 (unsigned long long)samples, cpu, seconds, seconds > 0 ? 100 * cpu / seconds : 0.0,
		 lowered);
	return profile__set_cost(p, text);
}

/* DIR/nupp-PID-YYYYMMDDTHHMMSSZ.EXT for the interval starting at t0_ns. */
static void file_name(const struct rotate *rt, char *name, size_t size)
{
	time_t secs = rt->t0_ns / 1000000000ULL;
	size_t n = strlen(rt->o.dir);
	struct tm tm;
	char when[32];

	gmtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(name, size, "%s%snupp-%d-%s%s", rt->o.dir, n && rt->o.dir[n - 1] == '/' ? "" : "/",
		 rt->o.pid, when, format__ext(rt->o.format));
}

/* Past --keep files: the oldest goes once name, the newest, is in place. */
static void keep_newest(struct rotate *rt, const char *name)
{
	char *slot;

	if (!rt->o.keep)
		return;
	slot = rt->names[rt->written % rt->o.keep];
	if (rt->written >= rt->o.keep && strcmp(slot, name))
		unlink(slot);
	snprintf(slot, PATH_MAX, "%s", name);
}

/* Write p, its counts those of the interval that ends now, and start the next. */
static int write_interval(struct rotate *rt, struct profile *p, unsigned weight, char *err,
			  size_t errsz)
{
	__u64 end_ns = realtime_ns();
	char name[PATH_MAX];
	struct output out;
	double t1 = monotonic_s(), cpu1 = own_cpu_s();

	if (interval__take(&rt->iv, p) || profile__set_title(p, rt->o.title) ||
	    say_cost(p, t1 - rt->t0, cpu1 - rt->cpu0, weight)) {
		snprintf(err, errsz, "out of memory while rotating");
		return -1;
	}
	p->time_ns = rt->t0_ns;
	p->duration_ns = (t1 - rt->t0) * 1e9;
	file_name(rt, name, sizeof(name));
	if (output__open(&out, name, err, errsz))
		return -1;
	if (format__write(p, rt->o.render, rt->o.format, out.f)) {
		snprintf(err, errsz, "cannot write %s: %s", name,
			 ferror(out.f) ? strerror(errno ? errno : EIO) : "out of memory");
		output__discard(&out);
		return -1;
	}
	if (output__commit(&out, err, errsz))
		return -1;
	keep_newest(rt, name);
	rt->written++;
	rt->t0 = t1;
	rt->t0_ns = end_ns;
	rt->cpu0 = cpu1;
	return 0;
}

int rotate__tick(struct rotate *rt, struct sampler *s, char *err, size_t errsz)
{
	struct sampler_stats st;
	struct profile p = {};
	int ret = -1;

	if (monotonic_s() - rt->t0 < rt->o.seconds)
		return 0;
	if (sampler__collect(s, &p, &st))
		snprintf(err, errsz, "out of memory while collecting samples");
	else
		ret = write_interval(rt, &p, st.weight, err, errsz);
	profile__free(&p);
	return ret;
}

int rotate__finish(struct rotate *rt, struct profile *p, unsigned weight, char *err,
		   size_t errsz)
{
	return write_interval(rt, p, weight, err, errsz);
}

unsigned rotate__written(const struct rotate *rt)
{
	return rt->written;
}

void rotate__close(struct rotate *rt)
{
	if (!rt)
		return;
	interval__free(&rt->iv);
	free(rt->names);
	free(rt);
}
