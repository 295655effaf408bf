/* SPDX-License-Identifier: MIT */
/* procmem.h - reading another process's memory (process_vm_readv). */
#ifndef NUPP_PROCMEM_H
#define NUPP_PROCMEM_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

/* A source of target memory: a live process, or recorded memory in tests. */
struct mem_reader {
	/* Copy n bytes at addr into dst; 0 on success, a negative errno else. */
	int (*read)(void *ctx, void *dst, size_t n, __u64 addr);
	void *ctx;
};

/* Read n bytes at addr of process pid; 0 or -errno. */
int procmem__read(pid_t pid, void *dst, size_t n, __u64 addr);

/* Is process pid still running: there, and not a zombie whose memory is gone? */
bool procmem__alive(pid_t pid);

/* When process pid started (clock ticks after boot, /proc/PID/stat), 0 when
 * it is gone or a zombie. With the pid, it names one process: a pid can be
 * another process's later, never with the same start time. */
unsigned long long procmem__start_time(pid_t pid);

/* What a session watches of a process at each poll, from /proc/PID/stat. */
struct proc_stat {
	unsigned long long start;	/* as procmem__start_time */
	unsigned long vsize;		/* bytes mapped: any new mapping changes it */
	long threads;
	unsigned long long cpu_ticks;	/* utime + stime, in clock ticks */
};

/* Process pid's, with start 0 when it is gone or a zombie; -1 when gone. */
int procmem__stat(pid_t pid, struct proc_stat *st);

/* The same through a descriptor of /proc/PID/stat kept open (-1 when
 * procmem__stat_open failed): each read is one system call, not a path's
 * lookup, open and close, and reads as gone once that process is, whoever
 * has its pid since. */
int procmem__stat_open(pid_t pid);
int procmem__stat_read(int fd, struct proc_stat *st);

/* Process pid's resident file-backed pages (/proc/PID/statm's third
 * field: O(1) for the kernel, unlike maps); -1 when it is gone. */
long procmem__file_pages(pid_t pid);

/* One line of /proc/PID/maps. */
struct proc_mapping {
	unsigned long start, end, off;
	char perms[8];
	char file[PATH_MAX];		/* "" for an anonymous mapping */
};

/* Process pid's /proc/PID/maps, to read with procmem__maps_next; NULL when
 * it cannot be opened (errno set). */
FILE *procmem__maps_open(pid_t pid);

/* The next mapping of f: 1, or 0 at its end. */
int procmem__maps_next(FILE *f, struct proc_mapping *m);

/* A reader over a live process; ctx points at a pid_t that outlives it. */
struct mem_reader procmem__reader(const pid_t *pid);

static inline int mem_read(const struct mem_reader *m, void *dst, size_t n, __u64 addr)
{
	return m->read(m->ctx, dst, n, addr);
}

#endif /* NUPP_PROCMEM_H */
