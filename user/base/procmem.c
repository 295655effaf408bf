// SPDX-License-Identifier: MIT
/* procmem.c - reading another process's memory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
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

int procmem__stat_open(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	return open(path, O_RDONLY | O_CLOEXEC);
}

int procmem__stat_read(int fd, struct proc_stat *st)
{
	char buf[1024], *p = NULL, state = 'X';
	unsigned long long utime, stime;
	ssize_t n;

	memset(st, 0, sizeof(*st));
	if (fd < 0)
		return -1;
	n = pread(fd, buf, sizeof(buf) - 1, 0);	/* from 0: the file made anew */
	if (n > 0) {
		buf[n] = '\0';
		p = strrchr(buf, ')');		/* the command name may hold anything */
	}
	/* Fields 3 (state) to 23 (vsize), see proc(5). */
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
			 "%*d %ld %*d %llu %lu", &state, &utime, &stime, &st->threads, &st->start,
			 &st->vsize) != 6)
		return -1;
	st->cpu_ticks = utime + stime;
	if (state == 'Z' || state == 'X')
		st->start = 0;
	return 0;
}

int procmem__stat(pid_t pid, struct proc_stat *st)
{
	int fd = procmem__stat_open(pid);
	int ret = procmem__stat_read(fd, st);

	if (fd >= 0)
		close(fd);
	return ret;
}

long procmem__file_pages(pid_t pid)
{
	char path[64], buf[256];
	long pages = -1;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/statm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return sscanf(buf, "%*u %*u %ld", &pages) == 1 ? pages : -1;
}

unsigned long long procmem__start_time(pid_t pid)
{
	struct proc_stat st;

	return procmem__stat(pid, &st) ? 0 : st.start;
}

bool procmem__alive(pid_t pid)
{
	return procmem__start_time(pid) != 0;
}

FILE *procmem__maps_open(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	return fopen(path, "re");
}

int procmem__maps_next(FILE *f, struct proc_mapping *m)
{
	char line[PATH_MAX + 128];

	while (fgets(line, sizeof(line), f)) {
		m->file[0] = '\0';
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095[^\n]", &m->start, &m->end, m->perms,
			   &m->off, m->file) >= 4)
			return 1;
	}
	return 0;
}
