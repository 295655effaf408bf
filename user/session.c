// SPDX-License-Identifier: MIT
/* session.c - one run of nupp-bpf: targets, channels, outputs, summary. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <elf.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/user.h>
#include <sys/wait.h>
#include "formats.h"
#include "output.h"
#include "privileges.h"
#include "procmem.h"
#include "session.h"
#include "trace_reasons.h"
#include "tracer.h"
#include "zones.h"
#include "../bpf/places.h"

#define TICK_MS		10	/* trace events are drained this often */
#define POLL_TICKS	10	/* symbolize new stacks every 100 ms */

static volatile sig_atomic_t stop_signal;
static struct rlimit fd_limit;	/* as we were started: the launched command's */
static bool status_shown;	/* the live status line is on the terminal */

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

static void say(const char *prefix, const char *fmt, va_list ap)
{
	if (status_shown)		/* a line of its own, not after the status */
		fputs("\r\033[K", stderr);
	status_shown = false;
	fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void session__error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("nupp-bpf: error: ", fmt, ap);
	va_end(ap);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("nupp-bpf: ", fmt, ap);
	va_end(ap);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A process the session follows: a -p target, the launched command, or one
 * found later (a child of one, or a process after its exec). */
struct place {
	struct lj_target t;
	struct zones *zones;
	pid_t pid;
	pid_t parent;			/* of a process followed as a child, else 0 */
	unsigned long long start;	/* procmem__start_time: with the pid, which
					 * process it is */
	bool identified;		/* LuaJIT found in it */
	bool attached;
	unsigned next_scan;		/* tick of the next VM scan, */
	unsigned scan_every;		/* ticks after the last one */
	__u64 code_seen;		/* lj_target__code_digest, last seen */
	bool code_tried;		/* identified with that code, in vain */
	bool exited;			/* or, one found later, left out */
	bool execed;			/* exited so: it executed another program
					 * (followed on in a later place, if one
					 * was free) */
	bool reborn;			/* such a later place */
	unsigned long zones_vsize;	/* its size when zones were last looked for */
};

struct run {
	const struct session_opts *o;
	struct place *places[NUPP_MAX_PLACES];	/* -p, or the launched command; then
						 * the processes they started, as found */
	int nplaces;
	bool places_full;		/* more processes started than followed; said so */
	bool follow_children;		/* launched or --children */
	pid_t child;			/* launched command, 0 for -p */
	int child_status;
	bool child_reaped;
	int release_fd;			/* write end of the child's start pipe */
	struct sampler *sampler;	/* NULL when not sampling */
	struct tracer *tracer;		/* NULL when not tracing, or not yet */
	bool trace_failed;		/* the collector could not attach; said so */
	bool unsupported;		/* the launched command's LuaJIT cannot be used */
	struct profile_out {		/* the profile's files */
		struct output out;	/* written through a new file (output.h) */
		enum profile_format format;
		char name[4096];
	} pouts[SESSION_MAX_OUTPUTS + 1];
	int npouts;
	struct output csv;		/* the trace aborts' */
	char csv_name[4096];
	bool created;			/* outputs were created: remove them on failure */
	char err[1024];
	char title[512];		/* what is profiled, as the formats say it */
	double started;
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

/* A new place for process pid (started at start, a child of parent or 0);
 * -1 when all are taken, which is said once. */
static int new_place(struct run *r, pid_t pid, unsigned long long start, pid_t parent)
{
	struct place *pl = r->nplaces < NUPP_MAX_PLACES ? calloc(1, sizeof(*pl)) : NULL;

	if (!pl) {
		if (!r->places_full && r->nplaces == NUPP_MAX_PLACES)
			note("note: more than %d processes to follow; later ones are not "
			     "profiled", NUPP_MAX_PLACES);
		else if (!r->places_full)
			note("note: out of memory; later processes are not profiled");
		r->places_full = true;
		return -1;
	}
	pl->pid = pid;
	pl->start = start;
	pl->parent = parent;
	r->places[r->nplaces] = pl;
	return r->nplaces++;
}

/* Fork the command, held before exec until release(). It asks to be traced
 * so that it stops right after exec: the LuaJIT linked into the executable
 * is then found and probed before any Lua code runs. */
static int launch(struct run *r)
{
	int pipefd[2];
	char c;

	if (pipe2(pipefd, O_CLOEXEC)) {
		session__error("pipe: %s", strerror(errno));
		return -1;
	}
	r->child = fork();
	if (r->child < 0) {
		session__error("fork: %s", strerror(errno));
		return -1;
	}
	if (r->child == 0) {
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) != 1)
			_exit(127);	/* nupp-bpf gave up before starting it */
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		if (fd_limit.rlim_max)
			setrlimit(RLIMIT_NOFILE, &fd_limit);
		execvp(r->o->argv[0], r->o->argv);
		session__error("cannot run %s: %s", r->o->argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[0]);
	r->release_fd = pipefd[1];
	return new_place(r, r->child, procmem__start_time(r->child), 0) < 0 ? -1 : 0;
}

/* Whether the kernel lists a process's children (CONFIG_PROC_CHILDREN); its
 * file in *path. */
static bool children_listed(char *path, size_t size)
{
	snprintf(path, size, "/proc/self/task/%d/children", (int)gettid());
	return !access(path, R_OK);
}

static int attach_target(struct run *r, struct place *pl, bool final);
static void trace_target(struct run *r, struct place *pl);
static void trace_zones(struct run *r, struct place *pl);

/* The program's entry point (AT_ENTRY), 0 when unknown. */
static __u64 entry_point(pid_t pid)
{
	char path[64];
	Elf64_auxv_t av;
	__u64 entry = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fread(&av, sizeof(av), 1, f) == 1 && av.a_type != AT_NULL)
		if (av.a_type == AT_ENTRY)
			entry = av.a_un.a_val;
	fclose(f);
	return entry;
}

/* Run the traced child to its entry point, where the dynamic loader has
 * mapped every library it needs and no code of the program has run: a
 * breakpoint there, taken and removed. false when it did not get there. */
static bool run_to_entry(struct run *r)
{
	__u64 entry = entry_point(r->child);
	struct user_regs_struct regs;
	long word;
	int st;

	errno = 0;
	word = entry ? ptrace(PTRACE_PEEKTEXT, r->child, (void *)entry, NULL) : -1;
	if (!entry || errno ||
	    ptrace(PTRACE_POKETEXT, r->child, (void *)entry, (void *)((word & ~0xffL) | 0xcc)))
		return false;
	for (int sig = 0;;) {
		if (ptrace(PTRACE_CONT, r->child, NULL, (void *)(long)sig) ||
		    waitpid(r->child, &st, 0) != r->child)
			return false;
		if (!WIFSTOPPED(st)) {		/* it died before its entry point */
			r->child_status = st;
			r->child_reaped = true;
			return false;
		}
		if (WSTOPSIG(st) == SIGTRAP)
			break;
		sig = WSTOPSIG(st);		/* not ours: deliver it */
	}
	if (ptrace(PTRACE_GETREGS, r->child, NULL, &regs) || regs.rip != entry + 1)
		return false;
	regs.rip = entry;
	return !ptrace(PTRACE_POKETEXT, r->child, (void *)entry, (void *)word) &&
	       !ptrace(PTRACE_SETREGS, r->child, NULL, &regs);
}

#define EXEC_WAIT_MS	300	/* how long a command without LuaJIT may take to exec another */
#define MAX_EXECS	8	/* wrappers followed through (env, chroot, unshare, nice ...) */

/* Whether process pid has started a process (its main thread's children). */
static bool has_children(pid_t pid)
{
	char path[64], c = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fread(&c, 1, 1, f) != 1)
		c = 0;
	fclose(f);
	return c != 0;
}

/* Stop the running traced child where it is, for a detach: SIGSTOP, which
 * the detach then suppresses; a signal of its own met on the way is
 * handed back in *sig. false when it exited instead. */
static bool stop_child(struct run *r, int *sig)
{
	int st;

	kill(r->child, SIGSTOP);
	for (;;) {
		if (waitpid(r->child, &st, 0) != r->child || !WIFSTOPPED(st)) {
			r->child_status = st;
			r->child_reaped = true;
			return false;
		}
		if (WSTOPSIG(st) == SIGSTOP && !(st >> 16))
			return true;
		if (!(st >> 16))	/* a signal of its own, delivered at the detach; */
			*sig = WSTOPSIG(st);	/* an exec event (SIGTRAP) is not one */
		if (ptrace(PTRACE_CONT, r->child, NULL, NULL))
			return false;
	}
}

/* A command with no LuaJIT at its entry point is often a wrapper that
 * executes the real program at once (env, chroot, unshare, nice): let it
 * run to its next exec, and stop there, as after the first. Its signals
 * pass on at once. false when it did not exec within EXEC_WAIT_MS or
 * started a process first (it is then stopped, ready to be detached, with
 * *sig to deliver), or exited. */
static bool run_to_exec(struct run *r, int *sig)
{
	struct timespec t0, now;
	int st, pending = 0;

	if (ptrace(PTRACE_SETOPTIONS, r->child, NULL, (void *)PTRACE_O_TRACEEXEC))
		return false;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (ptrace(PTRACE_CONT, r->child, NULL, NULL))
		return false;
	for (;;) {
		pid_t w = waitpid(r->child, &st, WNOHANG);

		if (w == r->child && !WIFSTOPPED(st)) {
			r->child_status = st;
			r->child_reaped = true;
			return false;
		}
		if (w == r->child && st >> 8 == (SIGTRAP | PTRACE_EVENT_EXEC << 8))
			return true;
		if (w == r->child) {		/* a signal of its own: deliver it */
			pending = st >> 16 ? 0 : WSTOPSIG(st);	/* an event stop is none */
			if (ptrace(PTRACE_CONT, r->child, NULL, (void *)(long)pending))
				return false;
			continue;
		}
		/* No exec within the wait, or a fork instead (a shell running its
		 * script): stopped for the detach (or gone); its children are
		 * followed from the polls on. */
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > EXEC_WAIT_MS ||
		    has_children(r->child)) {
			stop_child(r, sig);
			return false;
		}
		usleep(1000);
	}
}

/* Let the held command exec. It stops after exec: LuaJIT linked into the
 * executable is found then, LuaJIT in a library at the program's entry
 * point; either way before any Lua code runs. A wrapper that executes
 * another program is followed through that exec. Then the command runs
 * on, untraced. */
static void release(struct run *r)
{
	int st, a = 0, sig = 0;

	if (write(r->release_fd, "go", 1) != 1)
		session__error("cannot start %s", r->o->argv[0]);
	close(r->release_fd);
	r->release_fd = -1;
	if (waitpid(r->child, &st, 0) != r->child)
		return;
	if (!WIFSTOPPED(st)) {		/* exec failed: it already exited */
		r->child_status = st;
		r->child_reaped = true;
		return;
	}
	for (int execs = 0; execs <= MAX_EXECS; execs++) {
		a = attach_target(r, r->places[0], false);
		if (!a && run_to_entry(r))
			a = attach_target(r, r->places[0], false);
		if (a || r->child_reaped || execs == MAX_EXECS || !run_to_exec(r, &sig))
			break;
	}
	if (a > 0)
		trace_target(r, r->places[0]);
	r->unsupported = a < 0;		/* said so; the command runs on unprofiled */
	if (!r->child_reaped)
		ptrace(PTRACE_DETACH, r->child, NULL, (void *)(long)sig);
}

static void add_profile_out(struct run *r, const char *name, enum profile_format f)
{
	struct profile_out *po = &r->pouts[r->npouts++];

	snprintf(po->name, sizeof(po->name), "%s", name);
	po->format = f;
}

/* The profile's files. record: each -o FILE in the format its extension
 * names, unless --format says (default nupp-PID.collapsed, or the --format's
 * extension). The default job: NAME.collapsed (or --format's) and NAME.svg
 * (default NAME nupp-PID). --svg FILE adds a flame graph, or names the
 * default job's. */
static void profile_names(struct run *r, const char *base)
{
	const struct session_opts *o = r->o;
	enum profile_format f = o->format >= 0 ? (enum profile_format)o->format : FORMAT_COLLAPSED;
	char name[4096];

	for (int i = 0; o->command_given && i < o->noutputs; i++)
		add_profile_out(r, o->outputs[i],
				o->format >= 0 ? (enum profile_format)o->format
					       : format__of_file(o->outputs[i]));
	if (!o->command_given || !o->noutputs) {
		snprintf(name, sizeof(name), "%s%s", base, format__ext(f));
		add_profile_out(r, name, f);
	}
	if (o->svg) {
		add_profile_out(r, o->svg, FORMAT_SVG);
	} else if (!o->command_given && f != FORMAT_SVG) {
		snprintf(name, sizeof(name), "%s.svg", base);
		add_profile_out(r, name, FORMAT_SVG);
	}
}

/* Output names. trace: -o FILE (default nupp-PID-aborts.csv). The default
 * job writes every channel: -o NAME gives NAME-aborts.csv and the profile's
 * files (profile_names). */
static void output_names(struct run *r)
{
	const struct session_opts *o = r->o;
	char base[4000];

	if (o->noutputs)
		snprintf(base, sizeof(base), "%s", o->outputs[0]);
	else
		snprintf(base, sizeof(base), "nupp-%d", r->places[0]->pid);
	if (tracing(r))
		snprintf(r->csv_name, sizeof(r->csv_name),
			 o->command_given && o->noutputs ? "%s" : "%s-aborts.csv", base);
	if (sampling(r))
		profile_names(r, base);
}

/* Open every output now: an unwritable one fails before anything attaches. */
static int open_outputs(struct run *r)
{
	char err[PATH_MAX + 128];

	output_names(r);
	r->created = true;
	if (output__open(&r->csv, r->csv_name, err, sizeof(err)))
		goto fail;
	for (int i = 0; i < r->npouts; i++)
		if (output__open(&r->pouts[i].out, r->pouts[i].name, err, sizeof(err)))
			goto fail;
	return 0;
fail:
	session__error("%s", err);
	return -1;
}

/* Finish an output; false (and an error line) when it could not be written. */
static bool close_one(struct output *o)
{
	char err[PATH_MAX + 128];

	if (output__commit(o, err, sizeof(err))) {
		session__error("%s", err);
		return false;
	}
	return true;
}

/* A process followed as the child of another. */
static bool is_followed_child(const struct place *pl)
{
	return pl->parent != 0;
}

/* A process found during the session: a followed child, or one that
 * executed another program. What fails for it is said in a note, and the
 * session goes on without it. */
static bool found_later(const struct place *pl)
{
	return is_followed_child(pl) || pl->reborn;
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
	int ret = 0;

	if (code) {
		if (code != pl->code_seen) {
			pl->code_seen = code;
			pl->code_tried = false;
			if (found_later(pl))
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
	return 1;
fail:
	if (!found_later(pl)) {
		session__error("%s", r->err);
		return -1;
	}
	if (pl->reborn)
		note("note: PID %d is not profiled after its exec: %s", pl->pid, r->err);
	else
		note("note: PID %d, a child of PID %d, is not profiled: %s", pl->pid,
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
		note("note: trace aborts are not collected: %s", r->err);
	else
		session__error("%s", r->err);
}

/* Attach the trace collector to every -p target at once. Where LuaJIT's
 * abort path cannot be found, `trace` fails; the default job goes on
 * sampling. */
static void open_tracer(struct run *r)
{
	if (!tracing(r) || r->tracer || r->trace_failed)
		return;
	r->tracer = tracer__open(&r->places[0]->t, 1, r->o->include_benign, r->err, sizeof(r->err));
	for (int i = 1; r->tracer && i < r->nplaces; i++)
		if (tracer__add_target(r->tracer, &r->places[i]->t, r->err, sizeof(r->err))) {
			tracer__close(r->tracer);
			r->tracer = NULL;
		}
	if (!r->tracer)
		tracer_failed(r);
	for (int i = 0; r->tracer && i < r->nplaces; i++)
		trace_zones(r, r->places[i]);
}

/* Attach the trace collector to pl's process, found after the -p ones or
 * launched, opening it with the first that loads LuaJIT. If that one fails,
 * as open_tracer(); a later one is left out with a note. */
/* The zone state, found before the probe went on, to the trace channel. */
static void trace_zones(struct run *r, struct place *pl)
{
	if (r->tracer && pl->zones && zones__state_addr(pl->zones))
		tracer__set_zone_state(r->tracer, pl->pid, zones__state_addr(pl->zones));
}

static void trace_target(struct run *r, struct place *pl)
{
	if (!tracing(r) || r->trace_failed)
		return;
	if (r->tracer) {
		if (tracer__add_target(r->tracer, &pl->t, r->err, sizeof(r->err)))
			note("note: trace aborts of PID %d are not collected: %s", pl->pid, r->err);
		else
			trace_zones(r, pl);
		return;
	}
	r->tracer = tracer__open(&pl->t, 1, r->o->include_benign, r->err, sizeof(r->err));
	if (!r->tracer)
		tracer_failed(r);
	else
		trace_zones(r, pl);
}

/* Follow process pid, a child of parent, from now on, unless it is already
 * (by pid and start time: a process that exited may have left its pid to
 * this one) or has exited (a zombie its parent has not reaped yet). */
static void follow(struct run *r, pid_t pid, pid_t parent)
{
	unsigned long long start;

	/* Alive at its own check of this poll or the last: a pid is not
	 * another process's while its process lives. One that exited since
	 * is seen at its check, and a newcomer with its pid at the next poll. */
	for (int k = 0; k < r->nplaces; k++)
		if (r->places[k]->pid == pid && !r->places[k]->exited)
			return;
	start = procmem__start_time(pid);
	if (!start)
		return;
	for (int k = 0; k < r->nplaces; k++)
		if (r->places[k]->pid == pid && r->places[k]->start == start)
			return;
	new_place(r, pid, start, parent);
}

/* pl's process is gone: both channels stop taking its pid for it, and
 * keep what it did. */
static void retire(struct run *r, struct place *pl)
{
	pl->exited = true;
	if (r->sampler && pl->attached)
		sampler__target_gone(r->sampler, pl->pid);
	if (r->tracer && pl->attached)
		tracer__target_gone(r->tracer, pl->pid);
}

/* Did pl's attached process execute another program? Each channel stopped
 * taking it for the process it was at the exec itself (on_exec in the BPF
 * programs). Both are asked: each marks its target gone when it reports
 * the exec. */
static bool exec_seen(struct run *r, struct place *pl)
{
	bool s, t;

	if (!pl->attached)
		return false;
	s = r->sampler && sampler__target_execed(r->sampler, pl->pid);
	/* Both channels' programs ran in the exec: when sampling, the
	 * sampler's answer (a load from its .bss) spares the tracer's map
	 * lookup. */
	t = r->tracer && (s || !r->sampler) && tracer__target_execed(r->tracer, pl->pid);
	return s || t;
}

/* pl's process executed another program: its layout and VM went with the old
 * one. The process is followed on in a new place, and profiled again once
 * the new program holds LuaJIT. */
static void follow_exec(struct run *r, struct place *pl)
{
	int j = new_place(r, pl->pid, pl->start, pl->parent);

	retire(r, pl);
	pl->execed = true;
	note("note: PID %d executed another program; what it ran until then is kept%s",
	     pl->pid, j < 0 ? "" : ", and it is profiled on if the new one loads LuaJIT");
	if (j >= 0)
		r->places[j]->reborn = true;
}

/* Follow the children that thread tid of process pid started. */
static void follow_children_of_task(struct run *r, pid_t pid, const char *tid)
{
	char path[300];
	FILE *f;
	int child;

	snprintf(path, sizeof(path), "/proc/%d/task/%.32s/children", pid, tid);
	f = fopen(path, "re");
	while (f && fscanf(f, "%d", &child) == 1)
		follow(r, child, pid);
	if (f)
		fclose(f);
}

/* Follow the children of every thread of process pid (threads of them). */
static void follow_children_of(struct run *r, pid_t pid, long threads)
{
	char path[64];
	struct dirent *d;
	DIR *tasks;

	if (threads == 1) {		/* a worker, usually: no directory to list */
		snprintf(path, sizeof(path), "%d", pid);
		follow_children_of_task(r, pid, path);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	tasks = opendir(path);
	while (tasks && (d = readdir(tasks)))
		if (d->d_name[0] != '.')
			follow_children_of_task(r, pid, d->d_name);
	if (tasks)
		closedir(tasks);
}

/* Hand a zone module found in pl's process to both channels. */
static void refresh_zones(struct run *r, struct place *pl)
{
	struct zones *z = pl->zones;

	if (!z || !zones__refresh(z))
		return;
	if (r->sampler)
		sampler__set_zones(r->sampler, pl->pid, z);
	if (r->tracer)
		tracer__set_zone_state(r->tracer, pl->pid, zones__state_addr(z));
}

static void status_line(struct run *r, bool clear)
{
	__u64 samples = 0, stacks = 0;

	if (!isatty(STDERR_FILENO))
		return;
	if (clear) {
		fputs("\r\033[K", stderr);
		status_shown = false;
		return;
	}
	if (r->sampler)
		sampler__progress(r->sampler, &samples, &stacks);
	fprintf(stderr, "\r\033[Knupp-bpf: %.1f s, %llu samples, %llu stacks", now() - r->started,
		(unsigned long long)samples, (unsigned long long)stacks);
	status_shown = true;
}

/* Reap the launched child when it has exited. */
static void check_child(struct run *r, bool block)
{
	if (r->child && !r->child_reaped &&
	    waitpid(r->child, &r->child_status, block ? 0 : WNOHANG) == r->child)
		r->child_reaped = true;
}

/* A target attached before it created its VM (launched at exec) is scanned
 * for it, twice as long after each scan, until one is found. */
static void scan_vms(struct run *r, struct place *pl, unsigned tick)
{
	struct lj_target *t = &pl->t;

	if (t->ngs || tick < pl->next_scan)
		return;
	pl->scan_every = pl->scan_every ? 2 * pl->scan_every : POLL_TICKS;
	pl->next_scan = tick + pl->scan_every;
	if (lj_target__scan_vms(t) && r->sampler)
		sampler__refresh_target(r->sampler, t);
}

/* Say that pl's process is being recorded, once it is. */
static void say_recording(const struct run *r, const struct place *pl)
{
	const struct lj_target *t = &pl->t;
	char parent[48] = "";

	if (pl->reborn)
		snprintf(parent, sizeof(parent), ", after its exec");
	else if (is_followed_child(pl))
		snprintf(parent, sizeof(parent), ", a child of PID %d", pl->parent);
	note("recording PID %d: %s (%s)%s%s", pl->pid, t->shown, lj_target__build(t)->id, parent,
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

	check_child(r, false);
	for (int i = 0; i < r->nplaces; i++) {
		struct place *pl = r->places[i];
		struct proc_stat st;

		if (pl->exited)
			continue;
		/* Gone, a zombie, or its pid another process's now. */
		if (procmem__stat(pl->pid, &st) || st.start != pl->start ||
		    (r->child == pl->pid && r->child_reaped)) {
			retire(r, pl);
			continue;
		}
		if (exec_seen(r, pl)) {
			follow_exec(r, pl);
			continue;
		}
		if (r->follow_children)
			follow_children_of(r, pl->pid, st.threads);
		if (!pl->attached) {
			int a = attach_target(r, pl, false);

			if (a < 0)
				return -1;
			if (a > 0)
				trace_target(r, pl);
			if (a > 0 && found_later(pl) && r->o->summary)
				say_recording(r, pl);
		}
		/* A zone module loaded since: until its gate opens, its zones
		 * are not recorded. Looked for when the process mapped
		 * something (its size changed; only new files are read). */
		if (pl->attached && st.vsize != pl->zones_vsize) {
			pl->zones_vsize = st.vsize;
			refresh_zones(r, pl);
		}
		if (pl->attached)
			scan_vms(r, pl, tick);
		/* A child that never loads LuaJIT does not keep a -p session on. */
		alive += !is_followed_child(pl) || pl->attached;
	}
	/* The launched command runs until it is reaped (check_child, above),
	 * whatever programs it executed and whether any was profiled. */
	return r->child ? !r->child_reaped : alive;
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
		snprintf(r->title + n, sizeof(r->title) - n, " (PID %d)", r->child);
	else if (o->children && n < sizeof(r->title))
		snprintf(r->title + n, sizeof(r->title) - n, " and %s children",
			 o->npids > 1 ? "their" : "its");
}

/* Say what is being recorded at the start. */
static void announce(const struct run *r)
{
	for (int i = 0; i < r->nplaces; i++) {
		const struct place *pl = r->places[i];

		if (pl->attached)
			say_recording(r, pl);
		else if (r->child)
			note("recording PID %d: %s, once it or a process it starts loads LuaJIT",
			     pl->pid, r->o->argv[0]);
	}
}

static bool any_attached(const struct run *r)
{
	for (int i = 0; i < r->nplaces; i++)
		if (r->places[i]->attached)
			return true;
	return false;
}

static bool any_recording(const struct run *r)
{
	for (int i = 0; i < r->nplaces; i++)
		if (r->places[i]->attached && !r->places[i]->exited)
			return true;
	return false;
}

/* Poll until the duration ends, a stop signal comes, or every target (a
 * launched command) exits. While nothing is recorded (a launched process
 * has not mapped LuaJIT yet, one executed another program), look for
 * LuaJIT every tick. */
static int record(struct run *r)
{
	const struct session_opts *o = r->o;

	for (unsigned tick = 0; !stop_signal; tick++) {
		int alive;

		if (r->tracer)
			tracer__poll(r->tracer, TICK_MS);
		else
			usleep(TICK_MS * 1000);
		if (tick % POLL_TICKS && any_recording(r))
			continue;
		if (r->sampler)
			sampler__poll(r->sampler);
		alive = check_targets(r, tick);
		if (alive < 0)
			return -1;
		if (!alive || (o->duration && now() - r->started >= o->duration))
			break;
		if (tick % POLL_TICKS == 0)
			status_line(r, false);
	}
	status_line(r, true);
	return 0;
}

static void sample_summary(struct run *r, const struct profile *p, const struct sampler_stats *st,
			   long stacks)
{
	static const char *const names[NUPP_ST_MAX] = {
		"compiled", "interpreted", "C", "GC", "compiling",
	};
	__u64 state[NUPP_ST_MAX], total = 0, bad = 0;

	profile__totals(p, &r->o->render, state);
	for (int i = 0; i < NUPP_ST_MAX; i++)
		total += state[i];
	fprintf(stderr, "nupp-bpf: %.1f s, %llu samples, %ld stacks\n", now() - r->started,
		(unsigned long long)total, stacks);
	if (total) {
		fputs("  VM states:", stderr);
		for (int i = 0; i < NUPP_ST_MAX; i++)
			fprintf(stderr, " %s %.1f%%", names[i], 100.0 * state[i] / total);
		fputc('\n', stderr);
	}
	/* A thread with no function on its Lua stack runs the program's own
	 * code (an nginx worker between requests): not a failure to resolve. */
	if (st->unresolved[NUPP_ERR_NO_FRAME])
		fprintf(stderr, "  outside Lua: %llu of %llu samples (no function on the thread's "
			"Lua stack: the program's own code)\n",
			(unsigned long long)st->unresolved[NUPP_ERR_NO_FRAME],
			(unsigned long long)(st->samples - st->paused));
	for (int i = 0; i < NUPP_ERR_MAX; i++)
		bad += i == NUPP_ERR_NO_FRAME ? 0 : st->unresolved[i];
	if (bad || st->unsymbolized) {
		fprintf(stderr, "  unresolved: %llu of %llu samples (",
			(unsigned long long)(bad + st->unsymbolized),
			(unsigned long long)(st->samples - st->paused));
		for (int i = 0; i < NUPP_ERR_MAX; i++)
			if (st->unresolved[i] && i != NUPP_ERR_NO_FRAME)
				fprintf(stderr, "%s %llu, ", sampler__err_name(i),
					(unsigned long long)st->unresolved[i]);
		fprintf(stderr, "target gone before symbolization %llu)\n",
			(unsigned long long)st->unsymbolized);
	}
	if (st->unreadable)
		fprintf(stderr, "  %llu samples have frames that could not be read ([unknown])\n",
			(unsigned long long)st->unreadable);
	if (st->truncated)
		fprintf(stderr, "  %llu samples had deeper stacks than --depth %u\n",
			(unsigned long long)st->truncated, r->o->sampler.depth);
	/* The others ran code their trace called (a C helper, the exit
	 * handler), or their trace was gone before they were symbolized: their
	 * leaf is the trace's base frame. */
	if (st->trace_compiled)
		fprintf(stderr, "  compiled: %llu of %llu samples mapped through their trace's "
			"snapshots\n", (unsigned long long)st->trace_mapped,
			(unsigned long long)st->trace_compiled);
}

/* The collapsed stacks the summary shows, as text in *text (malloc'ed);
 * how many distinct ones there are, or -1. */
static long collapsed_text(const struct profile *p, const struct render_opts *o, char **text)
{
	size_t len;
	FILE *f = open_memstream(text, &len);
	long stacks;

	if (!f)
		return -1;
	stacks = profile__write_collapsed(p, o, f, NULL);
	if (fclose(f) || stacks < 0) {
		free(*text);
		*text = NULL;
		return -1;
	}
	return stacks;
}

/* The first five lines of the collapsed stacks, long ones cut. */
static void top_stacks(const char *text)
{
	const char *line = text;

	fputs("  top stacks:\n", stderr);
	for (int i = 0; i < 5 && line && *line; i++) {
		const char *end = strchr(line, '\n');
		int n = end ? (int)(end - line) : (int)strlen(line);

		if (n > 99)
			fprintf(stderr, "    %.90s…\n", line);
		else
			fprintf(stderr, "    %.*s\n", n, line);
		line = end ? end + 1 : NULL;
	}
}

/* What the formats say the profile is of: the title, when and how long. */
static void describe_profile(struct run *r, struct profile *p)
{
	profile__set_title(p, r->title);	/* none, when out of memory */
	p->time_ns = r->started_ns;
	p->duration_ns = (now() - r->started) * 1e9;
}

/* Write one of the profile's files and finish it; 0, or 1 with an error
 * line. A writer that ran out of memory leaves no half-written file. */
static int write_profile_out(struct run *r, const struct profile *p, struct profile_out *po)
{
	if (format__write(p, &r->o->render, po->format, po->out.f)) {
		if (!ferror(po->out.f)) {
			session__error("out of memory while writing %s", po->name);
			output__discard(&po->out);
			return 1;
		}
		errno = EIO;	/* for close_one's message: stdio's errno may be stale */
	}
	return close_one(&po->out) ? 0 : 1;
}

/* Samples: every file of the profile, in its format, and the summary. */
static int finish_samples(struct run *r)
{
	struct profile p = {};
	struct sampler_stats st;
	char *text = NULL;
	int ret = 0;

	if (sampler__collect(r->sampler, &p, &st)) {
		session__error("out of memory while collecting samples");
		profile__free(&p);
		return 1;
	}
	describe_profile(r, &p);
	for (int i = 0; i < r->npouts; i++)
		ret |= write_profile_out(r, &p, &r->pouts[i]);
	if (r->o->summary) {
		long stacks = collapsed_text(&p, &r->o->render, &text);

		sample_summary(r, &p, &st, stacks);
		if (text)
			top_stacks(text);
		free(text);
	}
	profile__free(&p);
	return ret;
}

/* The catalog row of a site (reasonId may carry a ".DETAIL" suffix). */
static const struct trace_reason *catalog_row(const struct trace_site *s)
{
	for (int i = 0; i < trace_nreasons; i++) {
		size_t n = strlen(trace_reasons[i].id);

		if (!strncmp(s->reason_id, trace_reasons[i].id, n) &&
		    (s->reason_id[n] == '\0' || s->reason_id[n] == '.'))
			return &trace_reasons[i];
	}
	return NULL;
}

static void trace_summary(const struct trace_report *rep)
{
	int shown = 0;

	fprintf(stderr, "nupp-bpf: %llu trace aborts, %llu blacklisted, %zu sites\n",
		rep->total_aborts, rep->blacklisted, rep->nsites);
	if (rep->lost)
		fprintf(stderr, "  %llu abort events lost (ring buffer full)\n", rep->lost);
	for (size_t i = 0; i < rep->nsites && shown < 5; i++) {
		const struct trace_site *s = &rep->sites[i];
		const struct trace_reason *row = catalog_row(s);

		if (strcmp(s->severity, "blacklist") && strcmp(s->reason_class, "blocker"))
			continue;
		fprintf(stderr, "  %-9s %5llu  %s  %s\n", s->severity, s->count, s->location, s->reason);
		if (row)
			fprintf(stderr, "            %s %s\n", row->explanation, row->action);
		shown++;
	}
}

/* Trace aborts: the CSV and the summary. */
static int finish_trace(struct run *r)
{
	struct trace_report rep;
	int ret = 0;

	if (!r->tracer) {
		close_one(&r->csv);	/* an empty file says: nothing collected */
		return r->trace_failed && !sampling(r);
	}
	if (tracer__report(r->tracer, &rep)) {
		session__error("out of memory while collecting trace aborts");
		return 1;
	}
	if (trace_report__write_csv(&rep, r->csv.f))
		errno = EIO;
	if (!close_one(&r->csv))
		ret = 1;
	if (r->o->summary)
		trace_summary(&rep);
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
	for (int i = 0; i < r->nplaces; i++) {
		const struct place *pl = r->places[i];

		if (pl->exited && !pl->execed && !r->child && !is_followed_child(pl) &&
		    procmem__start_time(pl->pid) != pl->start)	/* not one left out */
			note("note: PID %d exited during the session; what it did until then is kept",
			     pl->pid);
	}
	if (r->child && !any_attached(r) && r->nplaces == 1)
		note("note: %s never loaded LuaJIT", r->o->argv[0]);
	else if (r->child && !any_attached(r))
		note("note: neither %s nor the %d processes it started loaded LuaJIT", r->o->argv[0],
		     r->nplaces - 1);
	for (int i = 0; i < r->npouts; i++)
		if (strcmp(r->pouts[i].name, "-"))
			note("wrote %s", r->pouts[i].name);
	if (r->csv_name[0] && strcmp(r->csv_name, "-") && r->tracer)
		note("wrote %s", r->csv_name);
	return ret;
}

/* Exit status of the launched command, as a shell reports it. */
static int child_exit_status(struct run *r)
{
	check_child(r, true);
	if (WIFEXITED(r->child_status))
		return WEXITSTATUS(r->child_status);
	if (WIFSIGNALED(r->child_status))
		return 128 + WTERMSIG(r->child_status);
	return 1;
}

/* In the child that holds the probes: close every descriptor but the
 * kernel objects behind them (BPF links, programs, maps, perf events: all
 * anonymous inodes) and keep, so that no terminal, pipe, lock or file of
 * the caller's stays open for the seconds it takes. */
static void keep_only_kernel_objects(int keep)
{
	char path[64], target[32];
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");

	while (d && (e = readdir(d))) {
		int fd = atoi(e->d_name);
		ssize_t n;

		if (e->d_name[0] == '.' || fd == dirfd(d) || fd == keep)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		if (n < 0 || (target[n] = '\0', strncmp(target, "anon_inode:", 11)))
			close(fd);
	}
	if (d)
		closedir(d);
}

/* Removing a uprobe waits for RCU grace periods in the kernel, ~0.1 s each
 * and one after another: two per target, seconds for a server's workers.
 * Once everything is written, the sampler's timers are stopped, the trace
 * collector's probe reports nothing more, and a child process takes the
 * probes over: it leaves the caller's session, keeps
 * nothing else of ours, waits until the parent has let go of everything,
 * and exits. Its exit releases the last references, which is where the
 * kernel waits; the command returns at once. True in the parent. */
static bool detach_in_background(struct run *r)
{
	int go[2];
	pid_t pid;
	char c;

	if ((!r->sampler && !r->tracer) || pipe2(go, O_CLOEXEC))
		return false;
	if (r->sampler)
		sampler__stop(r->sampler);
	if (r->tracer)
		tracer__pause(r->tracer, true);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(go[0]);
		close(go[1]);
		return false;
	}
	if (pid == 0) {
		setsid();
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		keep_only_kernel_objects(go[0]);
		while (read(go[0], &c, 1) < 0 && errno == EINTR)
			;			/* EOF: the parent let go of everything */
		_exit(0);
	}
	close_range(3, ~0U, 0);
	return true;
}

static void cleanup(struct run *r, int ret)
{
	if (r->child && !r->child_reaped && r->release_fd >= 0) {
		close(r->release_fd);	/* the held child exits without running */
		check_child(r, true);
	}
	if (ret && r->created && !r->started) {	/* nothing was recorded */
		for (int i = 0; i < r->npouts; i++)
			output__discard(&r->pouts[i].out);
		output__discard(&r->csv);
	}
	for (int i = 0; i < r->npouts; i++)
		close_one(&r->pouts[i].out);
	close_one(&r->csv);
	if (r->started && detach_in_background(r))
		return;			/* nothing of ours is left to free */
	tracer__close(r->tracer);
	sampler__close(r->sampler);
	for (int i = 0; i < r->nplaces; i++) {
		zones__free(r->places[i]->zones);
		free(r->places[i]);
	}
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
	struct run r = { .o = o, .release_fd = -1 };
	struct sigaction sa = { .sa_handler = on_stop_signal };
	struct timespec wall;
	const char *why;
	int ret = 1;

	if (!privileges__bpf(&why)) {
		session__error("%s", why);
		return 1;
	}
	raise_fd_limit();
	/* A -p target must hold LuaJIT now; a launched one maps it later. */
	for (int i = 0; i < o->npids; i++) {
		if (new_place(&r, o->pids[i], procmem__start_time(o->pids[i]), 0) < 0)
			goto out;
		if (lj_target__open(&r.places[i]->t, o->pids[i], r.err, sizeof(r.err))) {
			session__error("%s", r.err);
			goto out;
		}
		r.places[i]->identified = true;
	}
	if (sampling(&r) && !(r.sampler = sampler__open(&o->sampler, r.err, sizeof(r.err)))) {
		session__error("%s", r.err);
		goto out;
	}
	if (o->argv || o->children) {
		char path[64];

		r.follow_children = children_listed(path, sizeof(path));
		if (!r.follow_children && o->children) {
			session__error("--children: this kernel does not list a process's children "
				       "(no %s: CONFIG_PROC_CHILDREN)", path);
			goto out;
		}
		if (!r.follow_children)
			note("note: the processes %s starts are not followed: this kernel does "
			     "not list them (no %s: CONFIG_PROC_CHILDREN)", o->argv[0], path);
	}
	if (o->argv && launch(&r))
		goto out;
	if (open_outputs(&r))
		goto out;
	for (int i = 0; i < o->npids; i++)
		if (attach_target(&r, r.places[i], true) < 0)
			goto out;
	if (o->npids) {
		open_tracer(&r);
		if (r.trace_failed && !sampling(&r))
			goto out;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	describe_targets(&r);
	clock_gettime(CLOCK_REALTIME, &wall);
	r.started_ns = wall.tv_sec * 1000000000ULL + wall.tv_nsec;
	r.started = now();
	if (r.child)
		release(&r);
	if (r.unsupported || (r.trace_failed && !sampling(&r))) {
		r.started = 0;		/* nothing is recorded: no outputs */
		check_child(&r, true);
		goto out;
	}
	if (o->summary)
		announce(&r);
	if (record(&r))
		goto out;
	ret = finish(&r);
	if (r.child) {
		if (!r.child_reaped && stop_signal == SIGTERM)
			kill(r.child, SIGTERM);	/* we were told to stop: so is the command */
		if (!ret)
			ret = child_exit_status(&r);
	}
out:
	cleanup(&r, ret);
	return ret;
}
