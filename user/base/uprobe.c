// SPDX-License-Identifier: MIT
/*
 * uprobe.c - uprobes for one process: uprobe_multi links where the kernel
 * filters them by process, else libbpf's perf-event uprobes (uprobe.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include "uprobe.h"

/* enum bpf_attach_type's BPF_TRACE_UPROBE_MULTI (Linux 6.6): a UAPI value,
 * fixed for good, which this distribution's headers predate. */
#define ATTACH_UPROBE_MULTI	48

/* BPF_LINK_CREATE's attributes for a uprobe_multi link, as the kernel's
 * union bpf_attr lays them out. */
struct uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 multi_flags;
	__u32 pid;
};

struct uprobe {
	int fd;			/* a uprobe_multi link; -1 for a perf-event uprobe */
	struct bpf_link *link;	/* the perf-event uprobe (libbpf's) */
};

int uprobe__link_create(int prog_fd, int attach_type, pid_t pid, const char *path, __u64 off,
			__u64 cookie)
{
	struct uprobe_multi_attr a;

	memset(&a, 0, sizeof(a));	/* its padding too: the kernel checks it is 0 */
	a.prog_fd = prog_fd;
	a.attach_type = attach_type;
	a.path = (__u64)(uintptr_t)path;
	a.offsets = (__u64)(uintptr_t)&off;
	a.cookies = (__u64)(uintptr_t)&cookie;
	a.cnt = 1;
	a.pid = pid;
	return syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
}

/* The kernel's answers to two links that must fail, as libbpf's own probe
 * asks them: one in "/", not a regular file, fails with EBADF where
 * uprobe_multi links exist (an older kernel rejects the attach type with
 * EINVAL first); one for PID -1 fails with EINVAL where the filter is per
 * process (6.10's fix checks the PID first; before it, per thread, the
 * lookup failed later, with EBADF or ESRCH). */
static bool probe_multi(void)
{
	struct bpf_insn ret0[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, po, .expected_attach_type = ATTACH_UPROBE_MULTI);
	int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "nupp_probe", "GPL", ret0, 2, &po);
	bool ok = false;
	int fd;

	if (prog < 0)
		return false;
	fd = uprobe__link_create(prog, ATTACH_UPROBE_MULTI, 0, "/", 0, 0);
	if (fd < 0 && errno == EBADF) {
		fd = uprobe__link_create(prog, ATTACH_UPROBE_MULTI, -1, "/", 0, 0);
		ok = fd < 0 && errno == EINVAL;
	}
	if (fd >= 0)
		close(fd);
	close(prog);
	return ok;
}

static bool multi;

/* NUPP_PERF_UPROBES=1 keeps libbpf's perf-event uprobes (the older kernels'
 * path, and the benchmark's side-by-side row). */
static void learn_multi(void)
{
	multi = !getenv("NUPP_PERF_UPROBES") && probe_multi();
}

bool uprobe__multi(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, learn_multi);
	return multi;
}

void uprobe__prepare(struct bpf_program *prog)
{
	if (uprobe__multi())
		bpf_program__set_expected_attach_type(prog, ATTACH_UPROBE_MULTI);
}

struct uprobe *uprobe__attach(const struct bpf_program *prog, pid_t pid, const char *path,
			      __u64 off, __u64 cookie)
{
	struct uprobe *u = calloc(1, sizeof(*u));
	int err;

	if (!u)
		return NULL;
	u->fd = -1;
	if (bpf_program__expected_attach_type(prog) == (enum bpf_attach_type)ATTACH_UPROBE_MULTI) {
		u->fd = uprobe__link_create(bpf_program__fd(prog), ATTACH_UPROBE_MULTI, pid, path,
					    off, cookie);
	} else {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = cookie);

		u->link = bpf_program__attach_uprobe_opts(prog, pid, path, off, &uo);
	}
	if (u->fd < 0 && !u->link) {
		err = errno;
		free(u);
		errno = err;
		return NULL;
	}
	return u;
}

struct uprobe *uprobe__adopt(struct bpf_link *link)
{
	struct uprobe *u = link ? calloc(1, sizeof(*u)) : NULL;

	if (!u) {
		bpf_link__destroy(link);
		return NULL;
	}
	*u = (struct uprobe){ .fd = -1, .link = link };
	return u;
}

void uprobe__detach(struct uprobe *u)
{
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	bpf_link__destroy(u->link);
	free(u);
}

static void *detach_thread(void *u)
{
	uprobe__detach(u);
	return NULL;
}

void uprobe__detach_aside(struct uprobe *u)
{
	pthread_attr_t attr;
	pthread_t t;
	int err;

	if (!u)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&t, &attr, detach_thread, u);
	pthread_attr_destroy(&attr);
	if (err)
		uprobe__detach(u);
}
