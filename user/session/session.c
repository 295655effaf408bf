// SPDX-License-Identifier: MIT
/*
 * session.c - one run of nupp-bpf, from its targets to its end.
 *
 * The session follows processes (targets.c, a place each): the -p targets,
 * or the launched command (launch.c), and the processes they start and
 * execute.
 * Each one that holds LuaJIT is identified (lj_target.h) and handed to both
 * channels, the sampler and the trace-abort collector. Then it polls: every
 * 10 ms the channels' events, every 100 ms the processes (exits, execs, new
 * children, zone modules, VMs not found yet), until the duration ends, a
 * signal comes or the targets exit. At the end it writes its files
 * (session_files.c), says its summary (summary.c) and leaves the probes'
 * removal to a child (detach.c).
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

#define TICK_MS		10	/* the live jobs' tick */
#define POLL_TICKS	10	/* poll the targets every 100 ms */

static volatile sig_atomic_t stop_signal;
static struct rlimit fd_limit;	/* as we were started: the launched command's */

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

struct run {
	const struct session_opts *o;
	struct targets targets;		/* -p, or the launched command; then the
					 * processes they started, as found */
	struct launch launched;		/* the launched command; child 0 for -p */
	struct sampler *sampler;	/* NULL when not sampling */
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
	__u64 started_ns;		/* CLOCK_REALTIME then, since the epoch */
};

static bool sampling(const struct run *r)
{
	return r->o->channels & SESSION_SAMPLE;
}

static bool tracing(const struct run *r)
{
	return r->o->channels & SESSION_TRACE;
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

/* Had pl run for less than STREAM_S when it was attached? A short program
 * may end at any moment, its memory gone with it: its new stacks are named
 * a millisecond after they come until they have streamed for STREAM_S
 * (wait_ticks). A process older than that, attached with -p, is no short
 * program: the pause after a wake grows from its first new stacks. */
static bool place_young(const struct place *pl)
{
	struct timespec now;

	if (place_is_child(pl) || clock_gettime(CLOCK_BOOTTIME, &now))
		return true;
	return now.tv_sec + now.tv_nsec / 1e9 - (double)pl->start / sysconf(_SC_CLK_TCK) < STREAM_S;
}

/* Launch the command, held before its exec until release(). */
static int launch(struct run *r)
{
	if (launch__start(&r->launched, r->o->argv, &fd_limit))
		return -1;
	return targets__add(&r->targets, r->launched.child,
			    procmem__start_time(r->launched.child), 0) < 0 ? -1 : 0;
}

static int attach_target(struct run *r, struct place *pl, bool final);
static void trace_target(struct run *r, struct place *pl);

#define MAX_EXECS	8	/* wrappers followed through (env, chroot, unshare, nice ...) */

/* Let the held command exec, and attach where it stops: right after the
 * exec, else at its entry point; a wrapper (no LuaJIT there) is followed
 * to its next exec. Then the command runs on, untraced. */
static void release(struct run *r)
{
	struct launch *l = &r->launched;
	int a = 0, sig = 0;

	if (!launch__release(l, r->o->argv[0]))
		return;
	for (int execs = 0; execs <= MAX_EXECS; execs++) {
		a = attach_target(r, r->targets.places[0], false);
		if (!a && launch__run_to_entry(l))
			a = attach_target(r, r->targets.places[0], false);
		if (a || l->reaped || execs == MAX_EXECS || !launch__run_to_exec(l, &sig))
			break;
	}
	if (a > 0)
		trace_target(r, r->targets.places[0]);
	r->unsupported = a < 0;		/* said so; the command runs on unprofiled */
	launch__detach(l, sig);
}

/* Identify LuaJIT in pl's process and start sampling it. 1 attached, 0 not
 * yet (a launched process may map LuaJIT later), -1 error. A process waiting for
 * LuaJIT is identified again only when its code mappings changed; one found
 * later, once they have stood still for a poll: between its fork and its
 * exec (a LuaJIT process running os.execute or io.popen), a child is a copy
 * of its parent that is about to become another program, and right after
 * an exec the dynamic loader is still mapping the new one. */
static int attach_target(struct run *r, struct place *pl, bool final)
{
	struct lj_target *t = &pl->t;
	__u64 code = pl->identified || final ? 0 : lj_target__code_digest(pl->pid);
	struct proc_stat st;
	int ret = 0;

	if (code) {
		if (code != pl->code_seen) {
			pl->code_seen = code;
			pl->code_tried = false;
			if (place_found_later(pl))
				return 0;
		}
		if (pl->code_tried)
			return 0;
		pl->code_tried = true;
	}
	if (!pl->identified)
		ret = lj_target__open(t, pl->pid, r->err, sizeof(r->err));
	if (ret) {
		if (!final && ret != LJ_TARGET_UNSUPPORTED)
			return 0;
		goto fail;
	}
	pl->identified = true;
	/* A zone module loaded already has its gate opened before the first
	 * sample is counted: every sample carries its zone. */
	if (!pl->zones)
		pl->zones = zones__new(t->pid);
	if (pl->zones)
		zones__refresh(pl->zones);
	if (r->sampler && sampler__add_target(r->sampler, t, pl->zones, r->err, sizeof(r->err)))
		goto fail;
	pl->attached = true;
	if (!procmem__stat(pl->pid, &st)) {
		pl->cpu_attached = pl->cpu_seen = st.cpu_ticks;
		pl->code_vsize = st.vsize;
	}
	pl->attached_at = monotonic_s();
	r->wake.young |= r->launched.child || place_young(pl);
	return 1;
fail:
	if (!place_found_later(pl)) {
		say__error("%s", r->err);
		return -1;
	}
	if (pl->reborn)
		say__note("note: PID %d is not profiled after its exec: %s", pl->pid, r->err);
	else
		say__note("note: PID %d, a child of PID %d, is not profiled: %s", pl->pid,
		     pl->parent, r->err);
	pl->exited = true;
	return 0;
}

/* The trace collector could not be opened (why in r->err): `trace` fails, the
 * default job goes on sampling. */
static void tracer_failed(struct run *r)
{
	r->trace_failed = true;
	if (sampling(r))
		say__note("note: trace aborts are not collected: %s", r->err);
	else
		say__error("%s", r->err);
}

/* Load the trace collector, once; false when it could not be (said). */
static bool tracer_ready(struct run *r)
{
	struct tracer_opts to = { .include_benign = r->o->include_benign };

	if (r->tracer)
		return true;
	if (!(r->tracer = tracer__open(&to, r->err, sizeof(r->err))))
		tracer_failed(r);
	else
		channels__add(&r->channels, tracer__channel(r->tracer));
	return r->tracer != NULL;
}

/* The collector could not take the first target: closed, and said so. */
static void drop_tracer(struct run *r)
{
	channels__drop(&r->channels, tracer__channel(r->tracer));
	tracer__close(r->tracer);
	r->tracer = NULL;
	tracer_failed(r);
}

/* Attach the trace collector to every -p target at once. Where LuaJIT's
 * abort path cannot be found, `trace` fails; the default job goes on
 * sampling. */
static void open_tracer(struct run *r)
{
	if (!tracing(r) || r->tracer || r->trace_failed || !tracer_ready(r))
		return;
	for (int i = 0; i < r->targets.n; i++)
		if (tracer__add_target(r->tracer, &r->targets.places[i]->t, r->targets.places[i]->zones, r->err,
				       sizeof(r->err))) {
			drop_tracer(r);
			return;
		}
}

/* Attach the trace collector to pl's process, found after the -p ones or
 * launched. If the first one fails, as open_tracer(); a later one is left
 * out with a note. */
static void trace_target(struct run *r, struct place *pl)
{
	bool first = !r->tracer;

	if (!tracing(r) || r->trace_failed || !tracer_ready(r))
		return;
	if (!tracer__add_target(r->tracer, &pl->t, pl->zones, r->err, sizeof(r->err)))
		return;
	if (first) {
		drop_tracer(r);
	} else {
		say__note("note: trace aborts of PID %d are not collected: %s", pl->pid, r->err);
	}
}

/* pl's process is gone: every channel stops taking its pid for it, and
 * keeps what it did. */
static void retire(struct run *r, struct place *pl)
{
	pl->exited = true;
	if (pl->attached)
		channels__remove_target(&r->channels, &pl->t);
}

/* Did pl's attached process execute another program? Each channel stopped
 * taking it for the process it was at the exec itself (on_exec in the BPF
 * programs), and marks its target gone when it reports the exec. */
static bool exec_seen(struct run *r, struct place *pl)
{
	return pl->attached && channels__target_execed(&r->channels, pl->pid);
}

/* pl's process executed another program: its layout and VM went with the old
 * one. The process is followed on in a new place, and profiled again once
 * the new program holds LuaJIT. */
static void follow_exec(struct run *r, struct place *pl)
{
	int j = targets__add_exec(&r->targets, pl);

	retire(r, pl);
	pl->execed = true;
	say__note("note: PID %d executed another program; what it ran until then is kept%s",
	     pl->pid, j < 0 ? "" : ", and it is profiled on if the new one loads LuaJIT");
}

/* Has pl's process perhaps loaded a zone module since it was last looked
 * for (until its gate opens, its zones are not recorded)? Reading its maps
 * costs ~0.15 ms, so it is read when the process mapped a file: its
 * resident file-backed pages changed (a module loaded and run), which a
 * growing heap leaves alone; on a change of its size alone (a heap growing
 * at each poll), at most once a second. Only new files are read then. */
static bool zones_maybe_loaded(struct place *pl, const struct proc_stat *st)
{
	long file_pages;
	double now;

	if (!pl->zones || zones__state_addr(pl->zones) || st->vsize == pl->zones_vsize)
		return false;
	file_pages = procmem__file_pages(pl->pid);
	now = monotonic_s();
	if (file_pages == pl->zones_file_pages && now - pl->zones_at < 1.0)
		return false;
	pl->zones_vsize = st->vsize;
	pl->zones_file_pages = file_pages;
	pl->zones_at = now;
	return true;
}

/* Whether a process profiled for less than 5 s changed its mappings since
 * its code was last looked for: a launched program maps its libraries
 * after the attach (the sampler must know their code is no trace's). Not
 * later: a server's heap changes its size all the time, and reading its
 * maps costs ~0.15 ms. */
static bool code_maybe_loaded(struct place *pl, const struct proc_stat *st)
{
	if (st->vsize == pl->code_vsize || monotonic_s() - pl->attached_at > 5)
		return false;
	pl->code_vsize = st->vsize;
	return true;
}

/* Hand a zone module found in pl's process to every channel. */
static void refresh_zones(struct run *r, struct place *pl)
{
	if (pl->zones && zones__refresh(pl->zones))
		channels__set_zones(&r->channels, &pl->t, pl->zones);
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

/* A target attached before it created its VM (launched at exec) is scanned
 * for it every millisecond for its first FAST_SCANS ms (wait_ticks()), then
 * at each poll, twice as long after each scan, until one is found. LuaJIT
 * creates its VM first thing, and its first work (the loader parsing the
 * main chunk, a large allocation) is C code, where r14 is not DISPATCH:
 * until the VM is found or a sample in the interpreter names it, a sample
 * there finds no VM. Scanning only at each poll (100 ms) would leave a
 * launch's first samples without one; a scan at start-up reads well under a
 * megabyte, so scanning often then is cheap. */
#define FAST_SCANS	100

static bool vm_awaited(const struct place *pl)
{
	return pl->attached && !pl->exited && !pl->t.ngs;
}

/* Scan pl's process for its VM; whether one was found. The samples that
 * found no VM before a scan that finds none were taken before the process
 * had one (the dynamic loader, libc's start-up): outside Lua, not
 * unresolved. */
static bool scan_for_vm(struct run *r, struct place *pl)
{
	__u64 vmless = r->sampler ? sampler__vmless(r->sampler, pl->pid) : 0;

	if (!lj_target__scan_vms(&pl->t)) {
		if (r->sampler)
			sampler__before_vm(r->sampler, pl->pid, vmless);
		return false;
	}
	if (r->sampler)
		sampler__refresh_target(r->sampler, &pl->t);
	return true;
}

static void scan_vms(struct run *r, struct place *pl, unsigned tick)
{
	struct lj_target *t = &pl->t;

	if (t->ngs || tick < pl->next_scan || pl->fast_scans < FAST_SCANS)
		return;
	pl->scan_every = pl->scan_every ? 2 * pl->scan_every : POLL_TICKS;
	pl->next_scan = tick + pl->scan_every;
	scan_for_vm(r, pl);
}

/* One fast scan of each place whose VM is awaited; whether any still is. */
static bool scan_awaited_vms(struct run *r)
{
	bool awaited = false;

	for (int i = 0; i < r->targets.n; i++) {
		struct place *pl = r->targets.places[i];

		if (!vm_awaited(pl) || pl->fast_scans >= FAST_SCANS)
			continue;
		pl->fast_scans++;
		awaited |= !scan_for_vm(r, pl);
	}
	return awaited;
}

/* wake__wait's fast scans: whether a VM is still awaited. */
static bool vms_awaited(void *arg)
{
	return scan_awaited_vms(arg);
}

/* Wait ticks (of TICK_MS), a millisecond at a time while a target's VM is
 * awaited, until a stop signal at most: woken by new stacks and by aborts,
 * which are taken in after each wake (wake.h). */
static void wait_ticks(struct run *r, unsigned ticks)
{
	wake__wait(&r->wake, &r->channels, ticks * TICK_MS / 1e3, vms_awaited, r, &stop_signal);
}

/* Say that pl's process is being recorded, once it is. */
static void say_recording(const struct run *r, const struct place *pl)
{
	const struct lj_target *t = &pl->t;
	char parent[48] = "";

	if (pl->reborn)
		snprintf(parent, sizeof(parent), ", after its exec");
	else if (place_is_child(pl))
		snprintf(parent, sizeof(parent), ", a child of PID %d", pl->parent);
	say__note("recording PID %d: %s (%s)%s%s", pl->pid, t->shown, lj_target__build(t)->id, parent,
	     r->o->duration || parent[0] ? "" : "; Ctrl-C to stop");
}

/* Mark exited targets, attach late ones; how many still run (a launched
 * command: whether it does), -1 on error. The processes the launched
 * command starts are followed, as perf record follows them, and with
 * --children those of the -p processes: a wrapper script runs its Lua in a
 * child, a server (an OpenResty master) in the workers it forks. Each new
 * child of a followed process takes a place, and is profiled once it holds
 * LuaJIT. A child that lives less than a poll (10 ms while nothing is
 * profiled, else 100 ms) can be missed. */
static int check_targets(struct run *r, unsigned tick)
{
	int alive = 0;

	launch__check(&r->launched, false);
	for (int i = 0; i < r->targets.n; i++) {
		struct place *pl = r->targets.places[i];
		struct proc_stat st;

		if (pl->exited)
			continue;
		/* Gone, a zombie, or its pid another process's now. */
		if (procmem__stat(pl->pid, &st) || st.start != pl->start ||
		    (r->launched.child == pl->pid && r->launched.reaped)) {
			retire(r, pl);
			continue;
		}
		if (pl->attached)
			pl->cpu_seen = st.cpu_ticks;
		if (exec_seen(r, pl)) {
			follow_exec(r, pl);
			continue;
		}
		if (r->targets.follow_children)
			targets__follow_children(&r->targets, pl->pid, st.threads);
		if (!pl->attached) {
			int a = attach_target(r, pl, false);

			if (a < 0)
				return -1;
			if (a > 0)
				trace_target(r, pl);
			if (a > 0 && place_found_later(pl) && r->o->summary)
				say_recording(r, pl);
		}
		if (pl->attached && zones_maybe_loaded(pl, &st))
			refresh_zones(r, pl);
		if (pl->attached && r->sampler && code_maybe_loaded(pl, &st))
			sampler__refresh_code(r->sampler, &pl->t);
		if (pl->attached)
			scan_vms(r, pl, tick);
		/* A child that never loads LuaJIT does not keep a -p session on. */
		alive += !place_is_child(pl) || pl->attached;
	}
	/* The launched command runs until it is reaped (check_child, above),
	 * whatever programs it executed and whether any was profiled. */
	return r->launched.child ? !r->launched.reaped : alive;
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
			say_recording(r, pl);
		else if (r->launched.child)
			say__note("recording PID %d: %s, once it or a process it starts loads LuaJIT",
			     pl->pid, r->o->argv[0]);
	}
}

static bool any_attached(const struct run *r)
{
	for (int i = 0; i < r->targets.n; i++)
		if (r->targets.places[i]->attached)
			return true;
	return false;
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

/* How many ticks to wait from tick on. The live jobs want a wait a tick;
 * so does a session that records nothing yet, to look for LuaJIT. Else the
 * wait lasts until the next poll, woken by new stacks and by aborts
 * (wake.h; both are taken in after each wake): a steady program costs
 * 10 wakes a second, not 100. */
static unsigned ticks_to_wait(const struct run *r, unsigned tick)
{
	if (r->top || r->files.rotate || !any_recording(r))
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
		if (r->sampler)
			sampler__poll(r->sampler);
		alive = check_targets(r, tick);
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

	if (st->samples || period_s <= 0 || hz <= 0)
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
	if (r->files.rotate && rotate__finish(r->files.rotate, &p, r->err, sizeof(r->err))) {
		say__error("%s", r->err);
		ret = 1;
	}
	profile__free(&p);
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

static int finish(struct run *r)
{
	int ret = 0;

	if (r->sampler)
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
	if (r->launched.child && !any_attached(r) && r->targets.n == 1)
		say__note("note: %s never loaded LuaJIT", r->o->argv[0]);
	else if (r->launched.child && !any_attached(r))
		say__note("note: neither %s nor the %d processes it started loaded LuaJIT", r->o->argv[0],
		     r->targets.n - 1);
	session_files__say_written(&r->files, r->o, r->tracer != NULL);
	return ret;
}

static void cleanup(struct run *r, int ret)
{
	sampler__close_early_probes();
	top__close(r->top);
	launch__abandon(&r->launched);
	session_files__close(&r->files, ret && !r->started);	/* nothing recorded: no files */
	if (r->started && detach__in_background(r->sampler, r->tracer))
		return;			/* nothing of ours is left to free */
	tracer__close(r->tracer);
	sampler__close(r->sampler);
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
		if (attach_target(&r, r.targets.places[i], true) < 0)
			goto out;
	if (o->npids) {
		open_tracer(&r);
		if (r.trace_failed && !sampling(&r))
			goto out;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	describe_targets(&r);
	r.started_ns = realtime_ns();
	r.started = monotonic_s();
	if (r.launched.child)
		release(&r);
	if (r.unsupported || (r.trace_failed && !sampling(&r))) {
		r.started = 0;		/* nothing is recorded: no outputs */
		launch__check(&r.launched, true);
		goto out;
	}
	if (o->summary)
		announce(&r);
	if (record(&r))
		goto out;
	ret = finish(&r);
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
