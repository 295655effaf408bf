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
#include "heap.h"
#include "base/procmem.h"
#include "base/say.h"
#include "base/util.h"
#include "heap/census.h"
#include "luajit/lj_target.h"

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

int heap__run(pid_t pid, bool json, bool pause)
{
	struct census *cs = NULL;
	const struct census **list = NULL;
	struct lj_target t;
	double paused_at = 0, paused_s = 0;
	bool resume = false;
	char err[1024];
	int ret = 1, n = 0;

	if (lj_target__open(&t, pid, err, sizeof(err))) {
		say__error("%s", err);
		return 1;
	}
	if (!t.ngs) {
		say__error("no LuaJIT VM found in PID %d%s%s", pid, t.layout_why[0] ? ": " : "",
			   t.layout_why);
		return 1;
	}
	cs = calloc(t.ngs, sizeof(*cs));
	list = calloc(t.ngs, sizeof(*list));
	if (!cs || !list) {
		say__error("out of memory");
		goto out;
	}
	if (pause && !stopped(pid)) {
		if (kill(pid, SIGSTOP)) {
			say__error("cannot stop PID %d: %s", pid, strerror(errno));
			goto out;
		}
		resume = true;
		paused_at = monotonic_s();
		while (!stopped(pid) && monotonic_s() - paused_at < 1)
			;	/* the stop lands at its next return to user mode */
	}
	for (n = 0; n < t.ngs; n++) {
		if (census__take(&t, t.gs[n], &cs[n], err, sizeof(err))) {
			say__error("%s", err);
			goto out;
		}
		list[n] = &cs[n];
	}
	if (resume) {
		kill(pid, SIGCONT);
		resume = false;
		paused_s = monotonic_s() - paused_at;
	}
	if (json) {
		census__print_json(list, n, pid, paused_s, stdout);
	} else {
		printf("nupp-bpf: heap of PID %d: %d VM%s%s\n", pid, n, n == 1 ? "" : "s",
		       pause ? "" : " (read while it ran: --pause stops it for an exact census)");
		if (pause)
			printf("  stopped for %.3f s\n", paused_s);
		for (int i = 0; i < n; i++)
			census__print(&cs[i], stdout);
	}
	ret = fflush(stdout) ? 1 : 0;
out:
	if (resume)
		kill(pid, SIGCONT);
	free(cs);
	free(list);
	return ret;
}
