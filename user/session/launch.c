// SPDX-License-Identifier: MIT
/*
 * launch.c - the launched command, held until its LuaJIT can be probed.
 *
 * The command is forked and waits on a pipe before it executes; it asks to
 * be traced, so that it stops right after exec. LuaJIT linked into the
 * executable is found there; LuaJIT in a library once the dynamic loader
 * has mapped it, at the program's entry point (a breakpoint taken and
 * removed). A wrapper that executes another program (env, chroot, nice) is
 * followed through that exec. Then the command runs on untraced, with its
 * signals, its fd limit and its exit status as without nupp-bpf.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/types.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include "launch.h"
#include "base/say.h"
#include "base/util.h"

int launch__start(struct launch *l, char **argv, const struct rlimit *limit)
{
	int pipefd[2];
	char c;

	*l = (struct launch){ .release_fd = -1 };
	if (pipe2(pipefd, O_CLOEXEC)) {
		say__error("pipe: %s", strerror(errno));
		return -1;
	}
	l->child = fork();
	if (l->child < 0) {
		say__error("fork: %s", strerror(errno));
		l->child = 0;
		return -1;
	}
	if (l->child == 0) {
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) != 1)
			_exit(127);	/* nupp-bpf gave up before starting it */
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		if (limit->rlim_max)
			setrlimit(RLIMIT_NOFILE, limit);
		execvp(argv[0], argv);
		say__error("cannot run %s: %s", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[0]);
	l->release_fd = pipefd[1];
	return 0;
}

/* The child is gone: keep its wait status. */
static bool reaped(struct launch *l, int st)
{
	l->status = st;
	l->reaped = true;
	return false;
}

bool launch__release(struct launch *l, const char *name)
{
	int st;

	if (write(l->release_fd, "go", 1) != 1)
		say__error("cannot start %s", name);
	close(l->release_fd);
	l->release_fd = -1;
	if (waitpid(l->child, &st, 0) != l->child)
		return false;
	return WIFSTOPPED(st) ? true : reaped(l, st);	/* exec failed: it exited */
}

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

bool launch__run_to_entry(struct launch *l)
{
	__u64 entry = entry_point(l->child);
	struct user_regs_struct regs;
	long word;
	int st;

	errno = 0;
	word = entry ? ptrace(PTRACE_PEEKTEXT, l->child, (void *)entry, NULL) : -1;
	if (!entry || errno ||
	    ptrace(PTRACE_POKETEXT, l->child, (void *)entry, (void *)((word & ~0xffL) | 0xcc)))
		return false;
	for (int sig = 0;;) {
		if (ptrace(PTRACE_CONT, l->child, NULL, (void *)(long)sig) ||
		    waitpid(l->child, &st, 0) != l->child)
			return false;
		if (!WIFSTOPPED(st))		/* it died before its entry point */
			return reaped(l, st);
		if (WSTOPSIG(st) == SIGTRAP)
			break;
		sig = WSTOPSIG(st);		/* not ours: deliver it */
	}
	if (ptrace(PTRACE_GETREGS, l->child, NULL, &regs) || regs.rip != entry + 1)
		return false;
	regs.rip = entry;
	return !ptrace(PTRACE_POKETEXT, l->child, (void *)entry, (void *)word) &&
	       !ptrace(PTRACE_SETREGS, l->child, NULL, &regs);
}

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
static bool stop_child(struct launch *l, int *sig)
{
	int st;

	kill(l->child, SIGSTOP);
	for (;;) {
		if (waitpid(l->child, &st, 0) != l->child || !WIFSTOPPED(st))
			return reaped(l, st);
		if (WSTOPSIG(st) == SIGSTOP && !(st >> 16))
			return true;
		if (!(st >> 16))	/* a signal of its own, delivered at the detach; */
			*sig = WSTOPSIG(st);	/* an exec event (SIGTRAP) is not one */
		if (ptrace(PTRACE_CONT, l->child, NULL, NULL))
			return false;
	}
}

bool launch__run_to_exec(struct launch *l, int *sig)
{
	double t0;
	int st, pending = 0;

	if (ptrace(PTRACE_SETOPTIONS, l->child, NULL, (void *)PTRACE_O_TRACEEXEC))
		return false;
	t0 = monotonic_s();
	if (ptrace(PTRACE_CONT, l->child, NULL, NULL))
		return false;
	for (;;) {
		pid_t w = waitpid(l->child, &st, WNOHANG);

		if (w == l->child && !WIFSTOPPED(st))
			return reaped(l, st);
		if (w == l->child && st >> 8 == (SIGTRAP | PTRACE_EVENT_EXEC << 8))
			return true;
		if (w == l->child) {		/* a signal of its own: deliver it */
			pending = st >> 16 ? 0 : WSTOPSIG(st);	/* an event stop is none */
			if (ptrace(PTRACE_CONT, l->child, NULL, (void *)(long)pending))
				return false;
			continue;
		}
		/* No exec within the wait, or a fork instead (a shell running its
		 * script): stopped for the detach (or gone); its children are
		 * followed from the polls on. */
		if ((monotonic_s() - t0) * 1e3 > LAUNCH_EXEC_WAIT_MS || has_children(l->child)) {
			stop_child(l, sig);
			return false;
		}
		usleep(1000);
	}
}

void launch__detach(struct launch *l, int sig)
{
	if (!l->reaped)
		ptrace(PTRACE_DETACH, l->child, NULL, (void *)(long)sig);
}

void launch__check(struct launch *l, bool block)
{
	if (l->child && !l->reaped && waitpid(l->child, &l->status, block ? 0 : WNOHANG) == l->child)
		l->reaped = true;
}

void launch__abandon(struct launch *l)
{
	if (l->child && !l->reaped && l->release_fd >= 0) {
		close(l->release_fd);	/* the held child exits without running */
		l->release_fd = -1;
		launch__check(l, true);
	}
}

int launch__exit_status(struct launch *l)
{
	launch__check(l, true);
	if (WIFEXITED(l->status))
		return WEXITSTATUS(l->status);
	if (WIFSIGNALED(l->status))
		return 128 + WTERMSIG(l->status);
	return 1;
}
