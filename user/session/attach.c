// SPDX-License-Identifier: MIT
/*
 * attach.c - the processes a session follows, handed to its channels: each
 * attached once it holds LuaJIT (and its VM is found), its zone module
 * followed, its exit and exec noticed at the polls (run.h).
 */
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

static void trace_target(struct run *r, struct place *pl);

/* A target attached before it created its VM (launched at exec) is scanned
 * for it every millisecond for its first FAST_SCANS ms (wake__wait), then
 * at each poll, twice as long after each scan, until one is found. LuaJIT
 * creates its VM first thing, and its first work (the loader parsing the
 * main chunk, a large allocation) is C code, where r14 is not DISPATCH:
 * until the VM is found or a sample in the interpreter names it, a sample
 * there finds no VM. Scanning only at each poll (100 ms) would leave a
 * launch's first samples without one; a scan at start-up reads well under a
 * megabyte, so scanning often then is cheap. */
#define FAST_SCANS	100

#define MAX_EXECS	8	/* wrappers followed through (env, chroot, unshare, nice ...) */

/* Had pl run for less than STREAM_S when it was attached? A short program
 * may end at any moment, its memory gone with it: its new stacks are named
 * a millisecond after they come until they have streamed for STREAM_S
 * (wake.h). A process older than that, attached with -p, is no short
 * program: the pause after a wake grows from its first new stacks. */
static bool place_young(const struct place *pl)
{
	struct timespec now;

	if (place_is_child(pl) || clock_gettime(CLOCK_BOOTTIME, &now))
		return true;
	return now.tv_sec + now.tv_nsec / 1e9 - (double)pl->start / sysconf(_SC_CLK_TCK) < STREAM_S;
}

/* Let the held command exec, and attach where it stops: right after the
 * exec, else at its entry point; a wrapper (no LuaJIT there) is followed
 * to its next exec. Then the command runs on, untraced. */
void run__release(struct run *r)
{
	struct launch *l = &r->launched;
	int a = 0, sig = 0;

	if (!launch__release(l, r->o->argv[0]))
		return;
	for (int execs = 0; execs <= MAX_EXECS; execs++) {
		a = run__attach_target(r, r->targets.places[0], false);
		if (!a && launch__run_to_entry(l))
			a = run__attach_target(r, r->targets.places[0], false);
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
int run__attach_target(struct run *r, struct place *pl, bool final)
{
	struct lj_target *t = &pl->t;
	__u64 code = pl->identified || final ? 0 : lj_target__code_digest(pl->pid);
	struct sampler *s[2];
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
	for (int i = 0; i < run__samplers(r, s); i++)
		if (sampler__add_target(s[i], t, pl->zones, r->err, sizeof(r->err)))
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
void run__open_tracer(struct run *r)
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
 * launched. If the first one fails, as run__open_tracer(); a later one is left
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
	if (pl->stat_fd >= 0)
		close(pl->stat_fd);
	pl->stat_fd = -1;
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
	struct sampler *s[2];
	int n = run__samplers(r, s);
	__u64 vmless[2];

	for (int i = 0; i < n; i++)
		vmless[i] = sampler__vmless(s[i], pl->pid);
	if (!lj_target__scan_vms(&pl->t)) {
		for (int i = 0; i < n; i++)
			sampler__before_vm(s[i], pl->pid, vmless[i]);
		return false;
	}
	for (int i = 0; i < n; i++)
		sampler__refresh_target(s[i], &pl->t);
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
bool run__scan_awaited_vms(struct run *r)
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

/* Say that pl's process is being recorded, once it is. */
void run__say_recording(const struct run *r, const struct place *pl)
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
int run__check_targets(struct run *r, unsigned tick)
{
	struct sampler *s[2];
	int alive = 0;
	bool children = r->targets.follow_children &&
			targets__children_may_be_new(&r->targets);

	launch__check(&r->launched, false);
	for (int i = 0; i < r->targets.n; i++) {
		struct place *pl = r->targets.places[i];
		struct proc_stat st;

		if (pl->exited)
			continue;
		/* Gone, a zombie, or its pid another process's now. */
		if (pl->stat_fd < 0)
			pl->stat_fd = procmem__stat_open(pl->pid);
		if (procmem__stat_read(pl->stat_fd, &st) || st.start != pl->start ||
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
		if (children)
			targets__follow_children(&r->targets, pl->pid, st.threads);
		if (!pl->attached) {
			int a = run__attach_target(r, pl, false);

			if (a < 0)
				return -1;
			if (a > 0)
				trace_target(r, pl);
			if (a > 0 && place_found_later(pl) && r->o->summary)
				run__say_recording(r, pl);
		}
		if (pl->attached && zones_maybe_loaded(pl, &st))
			refresh_zones(r, pl);
		if (pl->attached && r->sampler && code_maybe_loaded(pl, &st))
			for (int k = 0; k < run__samplers(r, s); k++)
				sampler__refresh_code(s[k], &pl->t);
		if (pl->attached)
			scan_vms(r, pl, tick);
		/* A child that never loads LuaJIT does not keep a -p session on. */
		alive += !place_is_child(pl) || pl->attached;
	}
	/* The launched command runs until it is reaped (check_child, above),
	 * whatever programs it executed and whether any was profiled. */
	return r->launched.child ? !r->launched.reaped : alive;
}

bool run__any_attached(const struct run *r)
{
	for (int i = 0; i < r->targets.n; i++)
		if (r->targets.places[i]->attached)
			return true;
	return false;
}
