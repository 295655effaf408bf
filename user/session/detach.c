// SPDX-License-Identifier: MIT
/*
 * detach.c - removing the session's probes without making the user wait.
 *
 * Removing a uprobe waits for RCU grace periods in the kernel, ~0.1 s each
 * and one after another: two per target, seconds for a server's workers. A
 * child process takes the kernel objects over (BPF links, programs, maps,
 * perf events: anonymous inodes), leaves the caller's session, keeps
 * nothing else of ours, waits until the parent has let go of everything,
 * and exits: its exit releases the last references, which is where the
 * kernel waits. The command returns at once.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "detach.h"

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

bool detach__in_background(struct sampler *s, struct tracer *t)
{
	int go[2];
	pid_t pid;
	char c;

	if ((!s && !t) || pipe2(go, O_CLOEXEC))
		return false;
	if (s)
		sampler__stop(s);
	if (t)
		tracer__pause(t, true);
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

