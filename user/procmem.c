// SPDX-License-Identifier: MIT
/* procmem.c - reading another process's memory. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include "procmem.h"

int procmem__read(pid_t pid, void *dst, size_t n, __u64 addr)
{
	struct iovec local = { dst, n };
	struct iovec remote = { (void *)(unsigned long)addr, n };
	ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (got < 0)
		return -errno;
	return (size_t)got == n ? 0 : -EFAULT;
}

static int procmem_read_cb(void *ctx, void *dst, size_t n, __u64 addr)
{
	return procmem__read(*(const pid_t *)ctx, dst, n, addr);
}

struct mem_reader procmem__reader(const pid_t *pid)
{
	return (struct mem_reader){ procmem_read_cb, (void *)pid };	/* only read */
}

unsigned long long procmem__start_time(pid_t pid)
{
	char path[64], buf[1024], *p = NULL, state = 'X';
	unsigned long long start = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f))
		p = strrchr(buf, ')');		/* the command name may hold anything */
	fclose(f);
	/* Fields 3 (state) to 22 (starttime), see proc(5). */
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu", &state, &start) != 2)
		return 0;
	return state == 'Z' || state == 'X' ? 0 : start;
}

bool procmem__alive(pid_t pid)
{
	return procmem__start_time(pid) != 0;
}
