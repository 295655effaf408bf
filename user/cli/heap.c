// SPDX-License-Identifier: MIT
/*
 * heap.c - nupp-bpf heap: a census of each VM's heap (heap/census.h).
 *
 * The process runs on while it is read, unless --pause: then it is stopped
 * (SIGSTOP) for the census and let go (SIGCONT) as soon as it is read, and
 * the time it stood still is said. A process stopped already (by a
 * debugger, or ^Z) is left stopped.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "heap.h"
#include "base/keymap.h"
#include "base/output.h"
#include "base/procmem.h"
#include "base/say.h"
#include "base/util.h"
#include "heap/census.h"
#include "heap/diff.h"
#include "luajit/lj_target.h"
#include "profile/formats.h"

/* Is pid stopped already (state T or t in /proc/PID/stat)? */
static bool stopped(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	bool t = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (f && fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		t = p[2] == 'T' || p[2] == 't';
	if (f)
		fclose(f);
	return t;
}

static void free_censuses(struct census *cs, int n);

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* Until monotonic time `until`, or ^C (or SIGTERM): the wait is cut short
 * and the diff is taken then. */
static void wait_until(double until)
{
	struct sigaction sa = { .sa_handler = on_interrupt }, old_int, old_term;
	double left;

	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	while (!interrupted && (left = until - monotonic_s()) > 0) {
		struct timespec ts = { (time_t)left, (long)((left - (time_t)left) * 1e9) };

		nanosleep(&ts, NULL);	/* EINTR: the loop looks again */
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
}

/* A census of every VM of t's process into *out (*n of them), stopped
 * meanwhile when pause (and not stopped already): the time it stood still
 * in *paused_s. 0, or 1 with the error said. */
static int take(const struct lj_target *t, bool pause, struct census **out, int *n,
		double *paused_s)
{
	struct census *cs = calloc(t->ngs, sizeof(*cs));
	double paused_at = 0;
	bool resume = false;
	char err[1024];
	int ret = 1;

	*n = 0;
	*paused_s = 0;
	if (!cs) {
		say__error("out of memory");
		return 1;
	}
	if (pause && !stopped(t->pid)) {
		if (kill(t->pid, SIGSTOP)) {
			say__error("cannot stop PID %d: %s", t->pid, strerror(errno));
			goto out;
		}
		resume = true;
		paused_at = monotonic_s();
		while (!stopped(t->pid) && monotonic_s() - paused_at < 1)
			;	/* the stop lands at its next return to user mode */
	}
	for (; *n < t->ngs; (*n)++)
		if (census__take(t, t->gs[*n], &cs[*n], err, sizeof(err))) {
			say__error("%s", err);
			goto out;
		}
	ret = 0;
out:
	if (resume) {
		kill(t->pid, SIGCONT);
		*paused_s = monotonic_s() - paused_at;
	}
	if (ret) {
		free_censuses(cs, *n);
		cs = NULL;
		*n = 0;
	}
	*out = cs;
	return ret;
}

static void free_censuses(struct census *cs, int n)
{
	for (int i = 0; cs && i < n; i++)
		census__free(&cs[i]);
	free(cs);
}

static void free_views(struct census_view *v, int n)
{
	for (int i = 0; v && i < n; i++)
		census_view__free(&v[i]);
	free(v);
}

/* The views of n censuses; NULL out of memory (said). */
static struct census_view *views_of(const struct census *cs, int n)
{
	struct census_view *v = calloc(n ? n : 1, sizeof(*v));

	for (int i = 0; v && i < n; i++)
		if (census_view__of(&cs[i], &v[i])) {
			free_views(v, i + 1);
			v = NULL;
		}
	if (!v)
		say__error("out of memory");
	return v;
}

/* The censuses' bytes by reference path as a profile: a row per path
 * group with bytes, a frame per group from the root down to it, each named
 * by its whole path ("_G", "_G.cache", "_G.cache.sessions[*]": in pprof's
 * and speedscope's tables a frame says where it is), under a frame per VM
 * when there are several. 0, or -1 out of memory. */
static int heap_profile(const struct census *cs, int n, pid_t pid, struct profile *p)
{
	char title[96];

	p->measure = PROFILE_HEAP;
	p->time_ns = (__u64)time(NULL) * 1000000000ULL;
	snprintf(title, sizeof(title), "heap of PID %d", (int)pid);
	if (profile__set_title(p, title))
		return -1;
	for (int v = 0; v < n; v++) {
		const struct path_groups *pg = &cs[v].paths;

		for (size_t i = 0; i < pg->n; i++) {
			__u32 ids[PATH_DEPTH_MAX + 1], chain[PATH_DEPTH_MAX];
			int depth = 0, k = 0;
			char vm[32];
			long id, row;

			if (!pg->g[i].bytes)
				continue;
			for (__u32 g = (__u32)i; g != PATH_ROOT && depth < PATH_DEPTH_MAX; g = pg->g[g].parent)
				chain[depth++] = g;
			if (n > 1) {
				snprintf(vm, sizeof(vm), "VM 0x%llx", (unsigned long long)cs[v].g);
				if ((id = profile__frame(p, &(struct profile_frame){
						.name = vm, .file = "", .kind = PROFILE_FRAME_PATH })) < 0)
					return -1;
				ids[k++] = (__u32)id;
			}
			for (int d = depth; d-- > 0;) {
				char path[CENSUS_PATH];

				/* registry, then registry._LOADED: one frame, package.loaded */
				if (d == depth - 1 && depth >= 2 &&
				    !strcmp(pg->g[chain[d]].seg, "registry") &&
				    !strcmp(pg->g[chain[d - 1]].seg, "._LOADED"))
					d--;
				path_groups__text(pg, chain[d], path, sizeof(path));
				if ((id = profile__frame(p, &(struct profile_frame){
						.name = path, .file = "",
						.kind = PROFILE_FRAME_PATH })) < 0)
					return -1;
				ids[k++] = (__u32)id;
			}
			if ((row = profile__add(p, (__u32)pid, 0, cs[v].g, "", ids, (__u32)k)) < 0)
				return -1;
			p->rows[row].state[0] += pg->g[i].bytes;
		}
	}
	return 0;
}

/* The row of one path that grew by g in VM b (paths: b's path texts, to
 * their index; vm: its frame, or -1). The paths above it end where one of
 * its segments begins (a '.' or a '['), outermost first. */
static int growth_row(struct profile *p, const struct census_view *b,
		      const struct keymap *paths, const struct heap_growth *g, long vm, pid_t pid)
{
	__u32 ids[PATH_DEPTH_MAX + 2];
	int k = 0;
	long id, row, at;

	if (vm >= 0)
		ids[k++] = (__u32)vm;
	for (size_t n = 1; g->path[n] && k < PATH_DEPTH_MAX; n++) {
		if ((g->path[n] != '.' && g->path[n] != '[') ||
		    (at = keymap__get(paths, g->path, n)) < 0)
			continue;
		if ((id = profile__frame(p, &(struct profile_frame){ .name = b->paths[at].path,
				.file = "", .kind = PROFILE_FRAME_PATH })) < 0)
			return -1;
		ids[k++] = (__u32)id;
	}
	if ((id = profile__frame(p, &(struct profile_frame){ .name = (char *)g->path, .file = "",
			.kind = PROFILE_FRAME_PATH })) < 0)
		return -1;
	ids[k++] = (__u32)id;
	if ((row = profile__add(p, (__u32)pid, 0, b->g, "", ids, (__u32)k)) < 0)
		return -1;
	p->rows[row].state[0] += (__u64)g->bytes;
	return 0;
}

/* The rows of VM b[v]'s growth since a (na VMs), under frame vm (-1: none). */
static int vm_growth(struct profile *p, const struct census_view *a, int na,
		     const struct census_view *b, int nb, long vm, pid_t pid)
{
	struct heap_growth *gr = NULL;
	struct keymap paths = {};
	size_t n = 0;
	int ret = heap_diff__growth(a, na, b, nb, &gr, &n);

	for (size_t i = 0; !ret && i < b->npaths; i++)
		ret = keymap__put(&paths, b->paths[i].path, strlen(b->paths[i].path), (long)i);
	for (size_t i = 0; !ret && i < n; i++)
		if (gr[i].bytes > 0)
			ret = growth_row(p, b, &paths, &gr[i], vm, pid);
	keymap__free(&paths);
	free(gr);
	return ret ? -1 : 0;
}

/* What grew from a to b as a profile of own bytes by reference path (heap
 * --diff -o): a row per path that grew, its frames the paths b lists above
 * it, outermost first (a kept path's ancestors retain more than it, and
 * are kept too), under a frame per VM when b has several. 0, or -1 out of
 * memory. */
static int growth_profile(const struct census_view *a, int na, const struct census_view *b,
			  int nb, pid_t pid, double seconds, struct profile *p)
{
	char title[128];

	p->measure = PROFILE_HEAP_GROWTH;
	/* Live, the second census is now; census files say no time. */
	p->time_ns = seconds > 0 ? (__u64)time(NULL) * 1000000000ULL : 0;
	p->duration_ns = (__u64)(seconds * 1e9);
	if (seconds > 0)
		snprintf(title, sizeof(title), "heap of PID %d: what grew in %.1f s", (int)pid, seconds);
	else
		snprintf(title, sizeof(title), "heap of PID %d: what grew between two censuses",
			 (int)pid);
	if (profile__set_title(p, title))
		return -1;
	for (int v = 0; v < nb; v++) {
		char name[32];
		long vm = -1;

		snprintf(name, sizeof(name), "VM 0x%llx", (unsigned long long)b[v].g);
		if (nb > 1 && (vm = profile__frame(p, &(struct profile_frame){ .name = name,
				.file = "", .kind = PROFILE_FRAME_PATH })) < 0)
			return -1;
		if (vm_growth(p, a, na, &b[v], nb, vm, pid))
			return -1;
	}
	return 0;
}

/* heap -o FILE...: p, made by made() (0, or -1 out of memory), in each,
 * written whole or not at all (output.h). */
static int write_outputs(const struct heap_opts *o, struct profile *p, int made)
{
	struct render_opts ro = {};
	char err[4200];
	int ret = 0;

	if (made) {
		say__error("out of memory");
		profile__free(p);
		return 1;
	}
	for (int i = 0; i < o->noutputs; i++) {
		struct output out;

		if (output__open(&out, o->outputs[i], err, sizeof(err))) {
			say__error("%s", err);
			ret = 1;
			continue;
		}
		if (format__write_output(p, &ro, format__of_file(o->outputs[i]), &out,
					 o->outputs[i], err, sizeof(err))) {
			say__error("%s", err);
			ret = 1;
		} else if (strcmp(o->outputs[i], "-")) {
			say__note("wrote %s", o->outputs[i]);
		}
	}
	profile__free(p);
	return ret;
}

/* heap --diff OLD.json NEW.json */
static int diff_files(const struct heap_opts *o)
{
	struct census_view *a = NULL, *b = NULL;
	int na = 0, nb = 0, ret = 1;
	pid_t pa = 0, pb = 0;
	char err[1024];

	if (census_view__read(o->old, &a, &na, &pa, err, sizeof(err)) ||
	    census_view__read(o->new, &b, &nb, &pb, err, sizeof(err))) {
		say__error("%s", err);
		goto out;
	}
	heap_diff__print(a, na, b, nb, pb, 0, o->json, stdout);
	ret = fflush(stdout) ? 1 : 0;
	if (o->noutputs) {
		struct profile p = {};

		ret |= write_outputs(o, &p, growth_profile(a, na, b, nb, pb, 0, &p));
	}
out:
	free_views(a, na);
	free_views(b, nb);
	return ret;
}

int heap__run(const struct heap_opts *o)
{
	struct census *cs = NULL, *before = NULL;
	struct census_view *a = NULL, *b = NULL;
	const struct census **list = NULL;
	struct lj_target t;
	struct profile p = {};
	double paused_s = 0, paused0 = 0, t0 = 0, t1;
	char err[1024];
	int ret = 1, n = 0, n0 = 0;

	if (o->old)
		return diff_files(o);
	if (lj_target__open(&t, o->pid, err, sizeof(err))) {
		say__error("%s", err);
		return 1;
	}
	if (!t.ngs) {
		say__error("no LuaJIT VM found in PID %d%s%s", o->pid, t.layout_why[0] ? ": " : "",
			   t.layout_why);
		return 1;
	}
	if (o->diff_s) {
		t0 = monotonic_s();
		if (take(&t, o->pause, &before, &n0, &paused0))
			return 1;
		say__note("first census taken (%d VM%s); the second in %ld s (^C: now)", n0,
			  n0 == 1 ? "" : "s", o->diff_s);
		wait_until(t0 + o->diff_s);
		/* A VM made meanwhile (a new thread's) is in the second. */
		if (lj_target__open(&t, o->pid, err, sizeof(err))) {
			say__error("%s", err);
			goto out;
		}
	}
	t1 = monotonic_s();
	if (take(&t, o->pause, &cs, &n, &paused_s))
		goto out;
	if (o->diff_s) {
		if (!(a = views_of(before, n0)) || !(b = views_of(cs, n)))
			goto out;
		heap_diff__print(a, n0, b, n, o->pid, t1 - t0, o->json, stdout);
		ret = fflush(stdout) ? 1 : 0;
		if (o->noutputs)
			ret |= write_outputs(o, &p, growth_profile(a, n0, b, n, o->pid, t1 - t0, &p));
		goto out;
	}
	if (!(list = calloc(n ? n : 1, sizeof(*list)))) {
		say__error("out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++)
		list[i] = &cs[i];
	if (o->noutputs && !strcmp(o->outputs[0], "-")) {
		ret = write_outputs(o, &p, heap_profile(cs, n, o->pid, &p));	/* that file is stdout */
		goto out;
	} else if (o->json) {
		census__print_json(list, n, o->pid, paused_s, stdout);
	} else {
		printf("nupp-bpf: heap of PID %d: %d VM%s%s\n", o->pid, n, n == 1 ? "" : "s",
		       o->pause ? "" : " (read while it ran: --pause stops it for an exact census)");
		if (o->pause)
			printf("  stopped for %.3f s\n", paused_s);
		for (int i = 0; i < n; i++)
			census__print(&cs[i], stdout);
	}
	ret = fflush(stdout) ? 1 : 0;
	if (o->noutputs)
		ret |= write_outputs(o, &p, heap_profile(cs, n, o->pid, &p));
out:
	free_views(a, n0);
	free_views(b, n);
	free_censuses(before, n0);
	free_censuses(cs, n);
	free(list);
	return ret;
}
