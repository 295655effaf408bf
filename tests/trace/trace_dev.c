// SPDX-License-Identifier: MIT
/*
 * trace_dev.c - test driver for the trace-abort collector (build/tests/nupp-trace-dev).
 *
 *	nupp-trace-dev [--benign] [--sync FIFO] [--done FIFO] [-o CSV] [--profile] -p PID...
 *
 * Attaches to the PIDs, opens --sync for writing (releasing a target that
 * waits on it), collects until every target has exited or a target opens
 * --done for reading (then drains while it is still alive), and writes the
 * report's sites as CSV. tests/trace/test_trace.py runs it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "luajit/lj_target.h"
#include "../../bpf/trace_abi.h"
#include "../../user/trace/trace.h"

#define MAX_PIDS 16

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static int alive(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	int ok = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		ok = p[2] != 'Z' && p[2] != 'X';
	fclose(f);
	return ok;
}

int main(int argc, char **argv)
{
	static struct lj_target targets[MAX_PIDS];
	const char *sync = NULL, *done = NULL, *out = NULL;
	bool benign = false, profile = false;
	int n = 0, rc = 1, done_fd = -1;
	char err[1024];
	struct tracer *tr;
	struct trace_report r;
	__u64 c[NUPP_TRC_MAX];
	FILE *f = stdout;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--benign"))
			benign = true;
		else if (!strcmp(argv[i], "--profile"))
			profile = true;
		else if (!strcmp(argv[i], "--sync") && i + 1 < argc)
			sync = argv[++i];
		else if (!strcmp(argv[i], "--done") && i + 1 < argc)
			done = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "-p") && i + 1 < argc && n < MAX_PIDS) {
			pid_t pid = atoi(argv[++i]);

			if (lj_target__open(&targets[n], pid, err, sizeof(err))) {
				fprintf(stderr, "nupp-trace-dev: error: %s\n", err);
				return 1;
			}
			n++;
		} else {
			fprintf(stderr, "usage: nupp-trace-dev [--benign] [--sync FIFO] [--done FIFO] "
				"[-o CSV] [--profile] -p PID...\n");
			return 2;
		}
	}
	tr = tracer__open(&(struct tracer_opts){ .include_benign = benign }, err, sizeof(err));
	for (int i = 0; tr && i < n; i++)
		if (tracer__add_target(tr, &targets[i], NULL, err, sizeof(err))) {
			tracer__close(tr);
			tr = NULL;
		}
	if (!tr) {
		fprintf(stderr, "nupp-trace-dev: error: %s\n", err);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (sync) {
		int fd = open(sync, O_WRONLY | O_CLOEXEC);

		if (fd >= 0)
			close(fd);
	}
	while (!stop) {
		int any = 0;

		tracer__poll(tr, 10);
		if (done && (done_fd = open(done, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0)
			break;	/* a target waits at its end: drain while it is alive */
		for (int i = 0; i < n; i++)
			any |= alive(targets[i].pid);
		if (!any)
			break;
	}
	if (tracer__report(tr, &r)) {
		fprintf(stderr, "nupp-trace-dev: error: out of memory\n");
		goto cleanup;
	}
	if (done_fd >= 0)
		close(done_fd);
	if (out && !(f = fopen(out, "we"))) {
		fprintf(stderr, "nupp-trace-dev: error: cannot write %s: %s\n", out, strerror(errno));
		goto cleanup_report;
	}
	trace_report__write_csv(&r, f);
	if (profile) {
		fprintf(stderr, "profile.id=%s\n", r.profile.id);
		fprintf(stderr, "totalAborts=%llu blacklisted=%llu lost=%llu catalog=%s/%d\n",
			r.total_aborts, r.blacklisted, r.lost, r.catalog_id, r.catalog_version);
		if (!tracer__counters(tr, c))
			fprintf(stderr, "probe hits=%llu no_J=%llu no_trace=%llu read=%llu rb_full=%llu events=%llu\n",
				c[0], c[1], c[2], c[3], c[4], c[5]);
	}
	rc = 0;
	if (f != stdout)
		fclose(f);
cleanup_report:
	trace_report__free(&r);
cleanup:
	tracer__close(tr);
	return rc;
}
