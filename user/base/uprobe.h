/* SPDX-License-Identifier: MIT */
/*
 * uprobe.h - a uprobe that runs a BPF program for one process, attached so
 * that the process's threads pay nothing for it until they hit it.
 *
 * libbpf attaches a uprobe for a pid as a perf event of the uprobe PMU
 * opened on that task: the event joins the task's perf context, and every
 * switch of the task in or out then goes through perf's context switch,
 * hit or not (docs/lab-notes.md, "A uprobe's perf event costs every
 * switch"). A uprobe_multi link (Linux 6.6; filtering by process, not by
 * thread, since 6.10) sets the same breakpoint in the same process and
 * opens no perf event. Kernels without it get libbpf's perf-event uprobes.
 * kernel-notes/uprobes.md has the details and how each is checked.
 */
#ifndef NUPP_UPROBE_H
#define NUPP_UPROBE_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>
#include <bpf/libbpf.h>

struct uprobe;

/* Whether this kernel attaches uprobes as uprobe_multi links with a
 * per-process filter (probed once, by the kernel's answers to two links
 * that must fail: see uprobe.c). */
bool uprobe__multi(void);

/* Before its object loads: make prog a uprobe_multi program where the
 * kernel has them (a program is one kind or the other, fixed at load). */
void uprobe__prepare(struct bpf_program *prog);

/* prog (loaded) at file offset off of path, for process pid only, with
 * cookie for bpf_get_attach_cookie(). NULL with errno set. */
struct uprobe *uprobe__attach(const struct bpf_program *prog, pid_t pid, const char *path,
			      __u64 off, __u64 cookie);

/* A perf-event uprobe attached elsewhere (an early probe), owned from now
 * on; NULL stays NULL. */
struct uprobe *uprobe__adopt(struct bpf_link *link);

/* Remove it here: the kernel waits for RCU grace periods (~0.1 s). */
void uprobe__detach(struct uprobe *u);

/* Remove it on a detached thread of its own, which sits out that wait while
 * the session goes on (a short program's last new stacks are named
 * meanwhile). NULL is nothing. */
void uprobe__detach_aside(struct uprobe *u);

/* A uprobe_multi link of attach_type (the plain one, or a uprobe session)
 * running prog_fd at file offset off of path for process pid: its fd, or -1
 * with errno set. The one place that builds BPF_LINK_CREATE's attributes
 * for them (this distribution's headers predate them). */
int uprobe__link_create(int prog_fd, int attach_type, pid_t pid, const char *path, __u64 off,
			__u64 cookie);

#endif
