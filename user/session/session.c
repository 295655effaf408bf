// SPDX-License-Identifier: MIT
/*
 * session.c - one run of nupp-bpf, from its targets to its end.
 *
 * The session follows processes (targets.c, a place each): the -p targets,
 * or the launched command (launch.c), and the processes they start and
 * execute.
 * Each one that holds LuaJIT is identified (lj_target.h) and handed to the
 * channels, the sampler and the trace-abort collector (attach.c). Then it
 * waits for their events (wake.c) and polls every 100 ms the processes
 * (exits, execs, new children, zone modules, VMs not found yet), until the
 * duration ends, a signal comes or the targets exit. At the end it writes
 * its files and says its summary (finish.c), and leaves the probes' removal
 * to a child (detach.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include "base/say.h"
#include "channel/channel.h"
#include "wake.h"
#include "run.h"
#include "detach.h"
#include "launch.h"
#include "base/privileges.h"
#include "base/procmem.h"
#include "session.h"
#include "session_files.h"
#include "summary.h"
#include "targets.h"
#include "top.h"
#include "trace/trace.h"
#include "base/util.h"
#include "zones/zones.h"

static volatile sig_atomic_t stop_signal;
static struct rlimit fd_limit;	/* as we were started: the launched command's */

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

/* The sampler's BPF object is loaded (its maps made, the verifier run:
 * ~40 ms) on a thread of its own while the -p targets are identified
 * (~40 ms more): the two overlap, and the first sample comes that much
 * sooner. Nothing of the one depends on the other. */
struct sampler_load {
	pthread_t thread;
	bool running;
	bool loaded;			/* set by the thread when it is done */
	const struct sampler_opts *opts;
	struct sampler *sampler;
	char err[sizeof(((struct run *)0)->err)];	/* as long as the session's */
};

static void *sampler_load_run(void *arg)
{
	struct sampler_load *l = arg;

	l->sampler = sampler__open(l->opts, l->err, sizeof(l->err));
	__atomic_store_n(&l->loaded, true, __ATOMIC_RELEASE);
	return NULL;
}

/* Is the load still under way? Then a target's uprobes are best opened now
 * (sampler__open_probes_early): their registration overlaps the load. Once
 * it is done, they come after the target is listed, not before its first
 * sample. */
static bool sampler_loading(struct sampler_load *l)
{
	return l->running && !__atomic_load_n(&l->loaded, __ATOMIC_ACQUIRE);
}

static void sampler_load_start(struct sampler_load *l, const struct sampler_opts *opts)
{
	l->opts = opts;
	l->running = !pthread_create(&l->thread, NULL, sampler_load_run, l);
	if (!l->running)
		sampler_load_run(l);	/* no thread: load it here */
}

/* The loaded sampler, NULL with why in err. */
static struct sampler *sampler_load_wait(struct sampler_load *l, char *err, size_t errsz)
{
	if (l->running)
		pthread_join(l->thread, NULL);
	l->running = false;
	if (!l->sampler)
		snprintf(err, errsz, "%s", l->err);
	return l->sampler;
}

/* Launch the command, held before its exec until run__release(). */
static int launch(struct run *r)
{
	if (launch__start(&r->launched, r->o->argv, &fd_limit))
		return -1;
	return targets__add(&r->targets, r->launched.child,
			    procmem__start_time(r->launched.child), 0) < 0 ? -1 : 0;
}



static void status_line(struct run *r, bool clear)
{
	__u64 samples = 0, stacks = 0;

	if (r->top || !isatty(STDERR_FILENO))	/* top's screen says it */
		return;
	if (clear) {
		say__status_clear();
		return;
	}
	if (r->sampler)
		sampler__progress(r->sampler, &samples, &stacks);
	say__status("%.1f s, %llu samples, %llu stacks", monotonic_s() - r->started,
		    (unsigned long long)samples, (unsigned long long)stacks);
}

/* wake__wait's fast scans: whether a VM is still awaited. */
static bool vms_awaited(void *arg)
{
	return run__scan_awaited_vms(arg);
}

/* Wait ticks (of TICK_MS), a millisecond at a time while a target's VM is
 * awaited, until a stop signal at most: woken by new stacks and by aborts,
 * which are taken in after each wake (wake.h). */
static void wait_ticks(struct run *r, unsigned ticks)
{
	wake__wait(&r->wake, &r->channels, ticks * TICK_MS / 1e3, vms_awaited, r, &stop_signal);
}

/* Process pid's command line, its arguments joined by spaces, into buf;
 * "" when it is gone. */
static void cmdline_of(pid_t pid, char *buf, size_t size)
{
	char path[64];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	buf[0] = '\0';
	if (!(f = fopen(path, "re")))
		return;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	while (n && !buf[n - 1])
		n--;
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
}

/* What the profile is of, for its title: the launched command, or the -p
 * processes' command lines; "luajit app.lua (PID 1234)". */
static void describe_targets(struct run *r)
{
	const struct session_opts *o = r->o;
	char cmd[256];
	size_t n = 0;

	for (int i = 0; i < o->npids && n < sizeof(r->title); i++) {
		cmdline_of(o->pids[i], cmd, sizeof(cmd));
		n += snprintf(r->title + n, sizeof(r->title) - n, "%s%s%sPID %d%s", i ? ", " : "",
			      cmd, cmd[0] ? " (" : "", o->pids[i], cmd[0] ? ")" : "");
	}
	for (int i = 0; o->argv && o->argv[i] && n < sizeof(r->title); i++)
		n += snprintf(r->title + n, sizeof(r->title) - n, "%s%s", i ? " " : "", o->argv[i]);
	if (o->argv && n < sizeof(r->title))
		snprintf(r->title + n, sizeof(r->title) - n, " (PID %d)", r->launched.child);
	else if (o->children && n < sizeof(r->title))
		snprintf(r->title + n, sizeof(r->title) - n, " and %s children",
			 o->npids > 1 ? "their" : "its");
}

/* Say what is being recorded at the start. */
static void announce(const struct run *r)
{
	for (int i = 0; i < r->targets.n; i++) {
		const struct place *pl = r->targets.places[i];

		if (pl->attached)
			run__say_recording(r, pl);
		else if (r->launched.child)
			say__note("recording PID %d: %s, once it or a process it starts loads LuaJIT",
			     pl->pid, r->o->argv[0]);
	}
}

static bool any_recording(const struct run *r)
{
	for (int i = 0; i < r->targets.n; i++)
		if (r->targets.places[i]->attached && !r->targets.places[i]->exited)
			return true;
	return false;
}

/* The live jobs (top.h, rotate.h) start with the recording: top takes the
 * terminal once every error of the start has been said. 0, or -1. */
static int start_live(struct run *r)
{
	__u64 period = r->sampler ? sampler__period_ns(r->sampler) : 0;	/* trace: none */
	struct top_opts to = {
		.render = &r->o->render, .title = r->title,
		.rate_hz = period ? (unsigned)(1e9 / period + 0.5) : 0,
		.off_cpu = r->sampler && sampler__off_cpu(r->sampler),
	};

	if (r->files.rotate)
		rotate__start(r->files.rotate);
	if (r->o->top && !(r->top = top__open(&to))) {
		say__error("out of memory");
		return -1;
	}
	return 0;
}

/* The live jobs' turn at each tick: top's keys and view, --rotate's file
 * when its interval is over. 1 to stop (q was pressed), -1 when a file
 * could not be written, else 0. */
static int live_tick(struct run *r)
{
	if (r->top && top__tick(r->top, r->sampler, r->tracer))
		return 1;
	if (r->files.rotate && rotate__tick(r->files.rotate, r->sampler, r->err, sizeof(r->err))) {
		say__error("%s", r->err);
		return -1;
	}
	return 0;
}

/* How many ticks to wait from tick on. top wants a wait a tick, for its
 * keys; so does a session that records nothing yet, to look for LuaJIT.
 * Else the wait lasts until the next poll, woken by new stacks and by
 * aborts (wake.h; both are taken in after each wake): a steady program
 * costs 10 wakes a second, not 100. --rotate's files are due at the poll
 * after their interval, a tenth of a second late at most: an always-on
 * profiler does not wake 100 times a second to ask the time. */
static unsigned ticks_to_wait(const struct run *r, unsigned tick)
{
	if (r->top || !any_recording(r))
		return 1;
	return (POLL_TICKS - tick % POLL_TICKS) % POLL_TICKS + 1;
}

/* Poll until the duration ends, a stop signal comes, or every target (a
 * launched command) exits. While nothing is recorded (a launched process
 * has not mapped LuaJIT yet, one executed another program), look for
 * LuaJIT every tick. */
static int record(struct run *r)
{
	const struct session_opts *o = r->o;

	if (start_live(r))
		return -1;
	for (unsigned tick = 0; !stop_signal; tick++) {
		unsigned ticks = ticks_to_wait(r, tick);
		int alive, live;

		wait_ticks(r, ticks);
		tick += ticks - 1;
		live = live_tick(r);
		if (live < 0)
			return -1;
		if (live)
			break;
		if (tick % POLL_TICKS && any_recording(r))
			continue;
		channels__poll(&r->channels);
		budget__check(&r->budget, r->sampler);
		alive = run__check_targets(r, tick);
		if (alive < 0)
			return -1;
		if (!alive || (o->duration && monotonic_s() - r->started >= o->duration))
			break;
		if (tick % POLL_TICKS == 0)
			status_line(r, false);
	}
	status_line(r, true);
	top__close(r->top);		/* the terminal as it was, before the summary */
	r->top = NULL;
	return 0;
}

static void cleanup(struct run *r, int ret)
{
	sampler__close_early_probes();
	top__close(r->top);
	launch__abandon(&r->launched);
	session_files__close(&r->files, ret && !r->started);	/* nothing recorded: no files */
	if (r->waits)
		sampler__stop(r->waits);
	if (r->started && detach__in_background(r->sampler, r->tracer))
		return;			/* nothing of ours is left to free */
	tracer__close(r->tracer);
	sampler__close(r->sampler);
	sampler__close(r->waits);
	targets__free(&r->targets);
}

/* Each place holds a few descriptors (its uprobes, files of /proc): a
 * server's workers need more than the usual soft limit of 1024. */
static void raise_fd_limit(void)
{
	struct rlimit more;

	if (getrlimit(RLIMIT_NOFILE, &fd_limit))
		return;
	more = fd_limit;
	more.rlim_cur = more.rlim_max;
	setrlimit(RLIMIT_NOFILE, &more);
}

int session__run(const struct session_opts *o)
{
	struct run r = { .o = o, .launched.release_fd = -1 };
	struct sampler_load loading = { 0 };
	struct sigaction sa = { .sa_handler = on_stop_signal };
	const char *why;
	int ret = 1;

	if (!privileges__bpf(&why)) {
		say__error("%s", why);
		return 1;
	}
	raise_fd_limit();
	if (sampling(&r))
		sampler_load_start(&loading, &o->sampler);
	/* A -p target must hold LuaJIT now; a launched one maps it later. */
	for (int i = 0; i < o->npids; i++) {
		if (targets__add(&r.targets, o->pids[i], procmem__start_time(o->pids[i]), 0) < 0)
			goto out;
		if (lj_target__open(&r.targets.places[i]->t, o->pids[i], r.err, sizeof(r.err))) {
			say__error("%s", r.err);
			goto out;
		}
		r.targets.places[i]->identified = true;
		if (sampling(&r) && sampler_loading(&loading))
			sampler__open_probes_early(&o->sampler, &r.targets.places[i]->t);
	}
	if (sampling(&r) && !(r.sampler = sampler_load_wait(&loading, r.err, sizeof(r.err)))) {
		say__error("%s", r.err);
		goto out;
	}
	channels__add(&r.channels, sampler__channel(r.sampler));
	if (o->wall) {
		struct sampler_opts off = o->sampler;

		off.clock = SAMPLER_CLOCK_OFF_CPU;
		off.freq_hz = off.period_us = 0;	/* every switch, not sweeps */
		if (!(r.waits = sampler__open(&off, r.err, sizeof(r.err)))) {
			say__error("%s", r.err);
			goto out;
		}
		channels__add(&r.channels, sampler__channel(r.waits));
	}
	if (o->argv || o->children) {
		char path[64];

		r.targets.follow_children = targets__children_listed(path, sizeof(path));
		if (!r.targets.follow_children && o->children) {
			say__error("--children: this kernel does not list a process's children "
				       "(no %s: CONFIG_PROC_CHILDREN)", path);
			goto out;
		}
		if (!r.targets.follow_children)
			say__note("note: the processes %s starts are not followed: this kernel does "
			     "not list them (no %s: CONFIG_PROC_CHILDREN)", o->argv[0], path);
	}
	if (o->argv && launch(&r))
		goto out;
	if (session_files__open(&r.files, o, r.targets.places[0]->pid, r.title, sampling(&r), tracing(&r)))
		goto out;
	for (int i = 0; i < o->npids; i++)
		if (run__attach_target(&r, r.targets.places[i], true) < 0)
			goto out;
	if (o->npids) {
		run__open_tracer(&r);
		if (r.trace_failed && !sampling(&r))
			goto out;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	describe_targets(&r);
	r.started_ns = realtime_ns();
	r.started = monotonic_s();
	budget__start(&r.budget, o->max_cpu);
	if (r.launched.child)
		run__release(&r);
	if (r.unsupported || (r.trace_failed && !sampling(&r))) {
		r.started = 0;		/* nothing is recorded: no outputs */
		launch__check(&r.launched, true);
		goto out;
	}
	if (o->summary)
		announce(&r);
	if (record(&r))
		goto out;
	ret = run__finish(&r);
	if (r.launched.child) {
		if (!r.launched.reaped && stop_signal == SIGTERM)
			kill(r.launched.child, SIGTERM);	/* we were told to stop: so is the command */
		if (!ret)
			ret = launch__exit_status(&r.launched);
	}
out:
	if (loading.running)	/* a target refused before the sampler was needed */
		r.sampler = sampler_load_wait(&loading, r.err, sizeof(r.err));
	cleanup(&r, ret);
	return ret;
}
