// SPDX-License-Identifier: MIT
/*
 * targets.c - the list of processes a session follows (targets.h): adding
 * one, once, by pid and start time; the children of a process, read from
 * /proc/PID/task/TID/children; the new place of a process that executed
 * another program.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "base/procmem.h"
#include "base/say.h"
#include "targets.h"
#include "zones/zones.h"

int targets__add(struct targets *ts, pid_t pid, unsigned long long start, pid_t parent)
{
	struct place *pl = ts->n < NUPP_MAX_PLACES ? calloc(1, sizeof(*pl)) : NULL;

	if (!pl) {
		if (!ts->full && ts->n == NUPP_MAX_PLACES)
			say__note("note: more than %d processes to follow; later ones are not "
			     "profiled", NUPP_MAX_PLACES);
		else if (!ts->full)
			say__note("note: out of memory; later processes are not profiled");
		ts->full = true;
		return -1;
	}
	pl->pid = pid;
	pl->start = start;
	pl->parent = parent;
	pl->stat_fd = -1;
	ts->places[ts->n] = pl;
	return ts->n++;
}

/* Follow process pid, a child of parent, from now on, unless it is already
 * (by pid and start time: a process that exited may have left its pid to
 * this one) or has exited (a zombie its parent has not reaped yet). */
static void follow(struct targets *ts, pid_t pid, pid_t parent)
{
	unsigned long long start;

	/* Alive at its own check of this poll or the last: a pid is not
	 * another process's while its process lives. One that exited since
	 * is seen at its check, and a newcomer with its pid at the next poll. */
	for (int k = 0; k < ts->n; k++)
		if (ts->places[k]->pid == pid && !ts->places[k]->exited)
			return;
	start = procmem__start_time(pid);
	if (!start)
		return;
	for (int k = 0; k < ts->n; k++)
		if (ts->places[k]->pid == pid && ts->places[k]->start == start)
			return;
	targets__add(ts, pid, start, parent);
}

/* Follow the children that thread tid of process pid started. */
static void follow_children_of_task(struct targets *ts, pid_t pid, const char *tid)
{
	char path[300];
	FILE *f;
	int child;

	snprintf(path, sizeof(path), "/proc/%d/task/%.32s/children", pid, tid);
	f = fopen(path, "re");
	while (f && fscanf(f, "%d", &child) == 1)
		follow(ts, child, pid);
	if (f)
		fclose(f);
}

void targets__follow_children(struct targets *ts, pid_t pid, long threads)
{
	char path[64];
	struct dirent *d;
	DIR *tasks;

	if (threads == 1) {		/* a worker, usually: no directory to list */
		snprintf(path, sizeof(path), "%d", pid);
		follow_children_of_task(ts, pid, path);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	tasks = opendir(path);
	while (tasks && (d = readdir(tasks)))
		if (d->d_name[0] != '.')
			follow_children_of_task(ts, pid, d->d_name);
	if (tasks)
		closedir(tasks);
}

/* The pid the kernel handed out last in this process's pid namespace, which
 * holds every target's (they are visible here): the fifth field of
 * /proc/loadavg. -1 when it cannot be read. The file is kept open and read
 * with pread from 0, one system call a poll (a seq file: made anew at 0). */
static long newest_pid(struct targets *ts)
{
	char buf[128];
	long pid = -1;
	ssize_t n;

	if (!ts->loadavg_open) {
		ts->loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
		ts->loadavg_open = true;
	}
	if (ts->loadavg_fd < 0 || (n = pread(ts->loadavg_fd, buf, sizeof(buf) - 1, 0)) <= 0)
		return -1;
	buf[n] = 0;
	sscanf(buf, "%*s %*s %*s %*s %ld", &pid);
	return pid;
}

bool targets__children_may_be_new(struct targets *ts)
{
	long pid = newest_pid(ts);

	if (pid < 0 || pid != ts->last_pid) {
		ts->last_pid = pid;
		ts->quiet_polls = 0;
		return true;
	}
	return ++ts->quiet_polls <= 1 || ts->quiet_polls % 50 == 0;
}

int targets__add_exec(struct targets *ts, const struct place *pl)
{
	int j = targets__add(ts, pl->pid, pl->start, pl->parent);

	if (j >= 0)
		ts->places[j]->reborn = true;
	return j;
}

bool targets__children_listed(char *path, size_t size)
{
	snprintf(path, size, "/proc/self/task/%d/children", (int)gettid());
	return !access(path, R_OK);
}

void targets__free(struct targets *ts)
{
	for (int i = 0; i < ts->n; i++) {
		if (ts->places[i]->stat_fd >= 0)
			close(ts->places[i]->stat_fd);
		zones__free(ts->places[i]->zones);
		free(ts->places[i]);
	}
	ts->n = 0;
	if (ts->loadavg_open && ts->loadavg_fd >= 0)
		close(ts->loadavg_fd);
	ts->loadavg_open = false;
}
