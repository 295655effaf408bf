/* SPDX-License-Identifier: MIT */
/* launch.h - the launched command: forked, held before its exec, stopped
 * right after it (and at its entry point, or at a wrapper's next exec), so
 * that LuaJIT is found and probed before any Lua code runs; then let go. */
#ifndef NUPP_LAUNCH_H
#define NUPP_LAUNCH_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

struct launch {
	pid_t child;		/* 0 before launch__start */
	int status;		/* its wait status, once reaped */
	bool reaped;
	int release_fd;		/* write end of its start pipe, -1 once released */
};

/* Fork argv, held before exec until launch__release. The child asks to be
 * traced, so that it stops right after exec, and takes the fd limit the
 * caller was started with (limit, when set). 0, or -1 with an error said. */
int launch__start(struct launch *l, char **argv, const struct rlimit *limit);

/* Let the held command exec; whether it stopped right after (else it
 * failed to exec and exited). */
bool launch__release(struct launch *l, const char *name);

/* Run the stopped child to its entry point, where the dynamic loader has
 * mapped every library it needs and no code of the program has run. false
 * when it did not get there. */
bool launch__run_to_entry(struct launch *l);

/* Run a stopped child that holds no LuaJIT (a wrapper: env, chroot, nice)
 * to its next exec and stop there. false when it did not exec within
 * LAUNCH_EXEC_WAIT_MS or started a process first (then it is stopped,
 * ready for launch__detach, with *sig to deliver), or exited. */
#define LAUNCH_EXEC_WAIT_MS	300
bool launch__run_to_exec(struct launch *l, int *sig);

/* The command runs on untraced, sig delivered (0 none). */
void launch__detach(struct launch *l, int sig);

/* Reap the child if it has exited (block: wait until it does). */
void launch__check(struct launch *l, bool block);

/* A held child that was never released exits without running. */
void launch__abandon(struct launch *l);

/* The child's exit status as a shell reports it (waits for it). */
int launch__exit_status(struct launch *l);

#endif /* NUPP_LAUNCH_H */
