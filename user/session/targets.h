/* SPDX-License-Identifier: MIT */
/*
 * targets.h - the processes a session follows, one place each: the -p
 * targets or the launched command, the children they start (launched, or
 * --children), and the program a process executes (a new place: its
 * layout and VM went with the old one). A process is told by its pid and
 * start time. The list knows nothing of the channels: the session hands
 * each place that holds LuaJIT to them (session.c).
 *
 * Four things here have "target" in their names: a place (struct place, a
 * process this list follows), the LuaJIT identified in it (struct
 * lj_target, lj_target.h), and what each channel keeps of it while it is
 * added (struct target in sampler_int.h, struct tr_target in trace.c: its
 * probes, its symbolizer). The channels look a target up by its pid.
 */
#ifndef NUPP_TARGETS_H
#define NUPP_TARGETS_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>
#include "luajit/lj_target.h"
#include "places.h"

struct zones;

struct place {
	struct lj_target t;
	struct zones *zones;
	pid_t pid;
	pid_t parent;			/* of a process followed as a child, else 0 */
	unsigned long long start;	/* procmem__start_time: with the pid, which
					 * process it is */
	bool identified;		/* LuaJIT found in it */
	bool attached;
	unsigned long long cpu_attached;	/* its CPU time (clock ticks) at the attach, */
	unsigned long long cpu_seen;	/* and at the last poll that found it alive */
	double attached_at;		/* when (CLOCK_MONOTONIC, s) */
	unsigned long code_vsize;	/* its size when its code was last looked for */
	unsigned fast_scans;		/* VM scans made a millisecond apart */
	unsigned next_scan;		/* tick of the next VM scan after those, */
	unsigned scan_every;		/* ticks after the last one */
	__u64 code_seen;		/* lj_target__code_digest, last seen */
	bool code_tried;		/* identified with that code, in vain */
	bool exited;			/* or, one found later, left out */
	int stat_fd;			/* its /proc/PID/stat, read at each poll; -1 */
	bool execed;			/* exited so: it executed another program
					 * (followed on in a later place, if one
					 * was free) */
	bool reborn;			/* such a later place */
	unsigned long zones_vsize;	/* its size when zones were last looked for, */
	long zones_file_pages;		/* its resident file pages then, */
	double zones_at;		/* and when (CLOCK_MONOTONIC, s) */
};

struct targets {
	struct place *places[NUPP_MAX_PLACES];	/* in the order found */
	int n;
	bool full;			/* more processes started than followed; said so */
	bool follow_children;		/* the children of each are followed */
	long last_pid;			/* the newest task's pid, as /proc/loadavg gave it */
	bool loadavg_open;		/* loadavg_fd was opened (or failed to: -1) */
	int loadavg_fd;			/* /proc/loadavg, kept open: pread from 0 */
	int quiet_polls;		/* polls since a new task was last possible */
};

/* A new place for process pid (started at start, a child of parent or 0);
 * its index, or -1 when all are taken (said once). */
int targets__add(struct targets *ts, pid_t pid, unsigned long long start, pid_t parent);

/* Follow the children every thread of process pid (of so many threads)
 * started, each in a new place unless it has one or has exited. */
void targets__follow_children(struct targets *ts, pid_t pid, long threads);

/* Whether the processes' children need listing at this poll: a task was
 * created since the poll before the last (a pid was handed out: the newest,
 * in /proc/loadavg, changed; a child is listed a moment after its pid is
 * taken, so the next poll looks again), or 5 s went by without a look.
 * Listing every target's children at every poll costs a server of 16
 * workers ~350 system calls a second; this costs 10. */
bool targets__children_may_be_new(struct targets *ts);

/* pl's process executed another program: it is followed on in a new place
 * (reborn), when one is free; which, or -1. */
int targets__add_exec(struct targets *ts, const struct place *pl);

/* Whether this kernel lists a process's children (CONFIG_PROC_CHILDREN),
 * which following them needs; the file it would be in *path. */
bool targets__children_listed(char *path, size_t size);

void targets__free(struct targets *ts);

/* A process followed as the child of another. */
static inline bool place_is_child(const struct place *pl)
{
	return pl->parent != 0;
}

/* A process found during the session: a followed child, or one that
 * executed another program. What fails for it is said in a note, and the
 * session goes on without it. */
static inline bool place_found_later(const struct place *pl)
{
	return place_is_child(pl) || pl->reborn;
}

#endif /* NUPP_TARGETS_H */
