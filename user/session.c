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
#include <sys/wait.h>
#include "flamegraph.h"
#include "session.h"

#define POLL_MS 100	/* symbolize new stacks this often, while their memory exists */

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

static void error_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void error_line(const char *fmt, ...)
{
	va_list ap;

	fputs("nupp-bpf: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	fputs("nupp-bpf: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Loading BPF and reading other processes needs CAP_BPF with CAP_PERFMON,
 * or CAP_SYS_ADMIN (root has all of them). */
static bool have_privileges(void)
{
	char line[256];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return geteuid() == 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff >> 21 & 1) || ((eff >> 39 & 1) && (eff >> 38 & 1));
}

/* Is pid still running (not gone, not a zombie)? */
static bool proc_alive(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

struct run {
	const struct session_opts *o;
	struct lj_target targets[SESSION_MAX_PIDS];
	bool attached[SESSION_MAX_PIDS];
	bool exited[SESSION_MAX_PIDS];
	pid_t pids[SESSION_MAX_PIDS];
	int npids;
	pid_t child;			/* launched command, 0 for -p */
	int child_status;
	bool child_reaped;
	int release_fd;			/* write end of the child's start pipe */
	struct sampler *sampler;
	FILE *out, *svg;
	char out_name[4096], svg_name[4096];
	char err[1024];
	double started;
};

/* Fork the command, held before exec until release(). */
static int launch(struct run *r)
{
	int pipefd[2];
	char c;

	if (pipe2(pipefd, O_CLOEXEC)) {
		error_line("pipe: %s", strerror(errno));
		return -1;
	}
	r->child = fork();
	if (r->child < 0) {
		error_line("fork: %s", strerror(errno));
		return -1;
	}
	if (r->child == 0) {
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) != 1)
			_exit(127);	/* nupp-bpf gave up before starting it */
		execvp(r->o->argv[0], r->o->argv);
		error_line("cannot run %s: %s", r->o->argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[0]);
	r->release_fd = pipefd[1];
	r->pids[0] = r->child;
	r->npids = 1;
	return 0;
}

static void release(struct run *r)
{
	if (r->release_fd > 0) {
		if (write(r->release_fd, "go", 1) != 1)
			error_line("cannot start %s", r->o->argv[0]);
		close(r->release_fd);
		r->release_fd = -1;
	}
}

/* Output names. record: -o FILE (default nupp-PID.collapsed). The default job
 * writes every channel: -o NAME gives NAME.collapsed, NAME.svg and
 * NAME-aborts.csv (default NAME nupp-PID). */
static void output_names(struct run *r)
{
	const struct session_opts *o = r->o;
	char base[4000];

	if (o->output)
		snprintf(base, sizeof(base), "%s", o->output);
	else
		snprintf(base, sizeof(base), "nupp-%d", r->pids[0]);
	if (o->command_given && o->output)
		snprintf(r->out_name, sizeof(r->out_name), "%s", o->output);
	else
		snprintf(r->out_name, sizeof(r->out_name), "%s.collapsed", base);
	if (o->svg)
		snprintf(r->svg_name, sizeof(r->svg_name), "%s", o->svg);
	else if (!o->command_given)
		snprintf(r->svg_name, sizeof(r->svg_name), "%s.svg", base);
}

/* Open every output now: an unwritable one fails before anything attaches. */
static int open_output(struct run *r)
{
	output_names(r);
	if (!strcmp(r->out_name, "-")) {
		r->out = stdout;
	} else if (!(r->out = fopen(r->out_name, "we"))) {
		error_line("cannot write %s: %s", r->out_name, strerror(errno));
		return -1;
	}
	if (r->svg_name[0] && !(r->svg = fopen(r->svg_name, "we"))) {
		error_line("cannot write %s: %s", r->svg_name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Identify LuaJIT in target i and start sampling it. 1 attached, 0 not yet
 * (a launched process may map LuaJIT later), -1 error. */
static int attach_target(struct run *r, int i, bool final)
{
	struct lj_target *t = &r->targets[i];

	if (lj_target__open(t, r->pids[i], r->err, sizeof(r->err))) {
		if (!final)
			return 0;
		error_line("%s", r->err);
		return -1;
	}
	if (sampler__add_target(r->sampler, t, r->err, sizeof(r->err))) {
		error_line("%s", r->err);
		return -1;
	}
	r->attached[i] = true;
	return 1;
}

static void status_line(struct run *r, bool clear)
{
	__u64 samples, stacks;

	if (!isatty(STDERR_FILENO))
		return;
	if (clear) {
		fputs("\r\033[K", stderr);
		return;
	}
	sampler__progress(r->sampler, &samples, &stacks);
	fprintf(stderr, "\r\033[Knupp-bpf: %.1f s, %llu samples, %llu stacks", now() - r->started,
		(unsigned long long)samples, (unsigned long long)stacks);
}

/* Reap the launched child when it has exited. */
static void check_child(struct run *r, bool block)
{
	if (r->child && !r->child_reaped &&
	    waitpid(r->child, &r->child_status, block ? 0 : WNOHANG) == r->child)
		r->child_reaped = true;
}

/* Poll until the duration ends, a stop signal comes, or every target exits. */
static void record(struct run *r)
{
	const struct session_opts *o = r->o;

	while (!stop_signal) {
		int alive = 0;

		usleep(POLL_MS * 1000);
		sampler__poll(r->sampler);
		check_child(r, false);
		for (int i = 0; i < r->npids; i++) {
			if (r->exited[i])
				continue;
			if (!proc_alive(r->pids[i]) || (r->child == r->pids[i] && r->child_reaped)) {
				r->exited[i] = true;
				continue;
			}
			if (!r->attached[i] && attach_target(r, i, false) < 0)
				return;
			alive++;
		}
		if (!alive || (o->duration && now() - r->started >= o->duration))
			break;
		status_line(r, false);
	}
	status_line(r, true);
}

static void summary(struct run *r, const struct profile *p, const struct sampler_stats *st,
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
	for (int i = 0; i < NUPP_ERR_MAX; i++)
		bad += st->unresolved[i];
	if (bad || st->unsymbolized) {
		fprintf(stderr, "  unresolved: %llu of %llu samples (", (unsigned long long)(bad + st->unsymbolized),
			(unsigned long long)(st->samples - st->paused));
		for (int i = 0; i < NUPP_ERR_MAX; i++)
			if (st->unresolved[i])
				fprintf(stderr, "%s %llu, ", sampler__err_name(i),
					(unsigned long long)st->unresolved[i]);
		fprintf(stderr, "target gone before symbolization %llu)\n",
			(unsigned long long)st->unsymbolized);
	}
	if (st->truncated)
		fprintf(stderr, "  %llu samples had deeper stacks than --depth %u\n",
			(unsigned long long)st->truncated, r->o->sampler.depth);
}

static void top_stacks(const char *path)
{
	char line[512];
	FILE *f = fopen(path, "re");

	if (!f)
		return;
	fputs("  top stacks:\n", stderr);
	for (int i = 0; i < 5 && fgets(line, sizeof(line), f); i++) {
		size_t n = strlen(line);

		if (n > 100)
			memcpy(line + 90, "…\n", sizeof("…\n"));
		fprintf(stderr, "    %s%s", n > 100 ? "…" : "", line);
	}
	fclose(f);
}

/* The flame graph, asked for with --svg or part of the default job. */
static int write_svg(struct run *r, const struct profile *p)
{
	char title[256];

	if (!r->svg)
		return 0;
	snprintf(title, sizeof(title), "nupp-bpf: PID %d", r->pids[0]);
	if (flamegraph__write(p, &r->o->render, title, r->svg) | fclose(r->svg)) {
		error_line("cannot write %s: %s", r->svg_name, strerror(errno));
		r->svg = NULL;
		return -1;
	}
	r->svg = NULL;
	if (r->o->summary)
		note("wrote %s", r->svg_name);
	return 0;
}

static int finish(struct run *r)
{
	struct profile p = {};
	struct sampler_stats st;
	long stacks;
	int ret = 0;

	if (sampler__collect(r->sampler, &p, &st)) {
		error_line("out of memory while collecting samples");
		return 1;
	}
	stacks = profile__write_collapsed(&p, &r->o->render, r->out, NULL);
	if (stacks < 0 || fflush(r->out) || (r->out != stdout && fclose(r->out))) {
		error_line("cannot write %s: %s", r->out_name, strerror(errno));
		ret = 1;
	}
	r->out = NULL;
	if (write_svg(r, &p))
		ret = 1;
	if (r->o->summary) {
		summary(r, &p, &st, stacks);
		if (strcmp(r->out_name, "-"))
			top_stacks(r->out_name);
		for (int i = 0; i < r->npids; i++)
			if (r->exited[i] && !r->child)
				note("note: PID %d exited during the session", r->pids[i]);
		if (strcmp(r->out_name, "-"))
			note("wrote %s", r->out_name);
	}
	profile__free(&p);
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

int session__run(const struct session_opts *o)
{
	struct run r = { .o = o, .release_fd = -1 };
	struct sigaction sa = { .sa_handler = on_stop_signal };
	int ret = 1;

	if (!have_privileges()) {
		error_line("loading BPF programs needs root (or CAP_BPF and CAP_PERFMON)");
		return 1;
	}
	memcpy(r.pids, o->pids, sizeof(o->pids));
	r.npids = o->npids;
	/* A -p target must hold LuaJIT now; a launched one maps it later. */
	for (int i = 0; i < r.npids; i++)
		if (lj_target__open(&r.targets[i], r.pids[i], r.err, sizeof(r.err))) {
			error_line("%s", r.err);
			return 1;
		}
	r.sampler = sampler__open(&o->sampler, r.err, sizeof(r.err));
	if (!r.sampler) {
		error_line("%s", r.err);
		return 1;
	}
	if (o->argv && launch(&r))
		goto out;
	if (open_output(&r))
		goto out;
	for (int i = 0; i < o->npids; i++)
		if (attach_target(&r, i, true) < 0)
			goto out;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	r.started = now();
	release(&r);
	record(&r);
	ret = finish(&r);
	if (r.child) {
		if (!r.child_reaped && stop_signal == SIGTERM)
			kill(r.child, SIGTERM);	/* we were told to stop: so is the command */
		else if (r.child && !r.attached[0] && r.child_reaped)
			note("note: %s never loaded LuaJIT", o->argv[0]);
		sampler__close(r.sampler);
		r.sampler = NULL;
		return ret ? ret : child_exit_status(&r);
	}
out:
	if (r.child && !r.child_reaped) {
		close(r.release_fd);	/* the held child exits without running */
		check_child(&r, true);
	}
	if (r.out && r.out != stdout)
		fclose(r.out);
	if (r.svg)
		fclose(r.svg);
	sampler__close(r.sampler);
	return ret;
}
