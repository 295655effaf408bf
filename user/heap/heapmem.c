// SPDX-License-Identifier: MIT
/* heapmem.c - a process's heap, copied whole (heapmem.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "heapmem.h"
#include "base/util.h"

/* Half of MemAvailable, in bytes: what the copies may take. */
static __u64 copy_budget(void)
{
	char line[128];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024 / 2;
}

/* The mappings to copy, listed before any is copied: a census of its own
 * process (profile.heap()) must not copy the copies it makes. */
int heapmem__init(struct heapmem *m, pid_t pid)
{
	struct proc_mapping map;
	__u64 budget = copy_budget();
	FILE *maps = procmem__maps_open(pid);

	memset(m, 0, sizeof(*m));
	m->pid = pid;
	if (!maps)
		return 0;	/* every read goes to the process */
	while (procmem__maps_next(maps, &map)) {
		__u64 len = map.end - map.start;

		if (map.perms[0] != 'r' || map.perms[1] != 'w' ||
		    (map.file[0] && strcmp(map.file, "[heap]")) || m->copied + len > budget)
			continue;
		if (ARRAY_ROOM(m->r, m->n, m->cap, 64)) {
			fclose(maps);
			return -1;
		}
		m->r[m->n++] = (struct region){ map.start, map.end, NULL };
		m->copied += len;
	}
	fclose(maps);
	m->copied = 0;
	for (size_t i = 0, kept = 0; i < m->n; i++) {
		struct region r = m->r[i];
		__u64 len = r.hi - r.lo;

		/* In huge pages where the kernel has them: a copy of a GB in
		 * 4-KiB pages spends most of its time in page faults. */
		r.data = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r.data == MAP_FAILED) {
			m->n = kept;
			return -1;
		}
		madvise(r.data, len, MADV_HUGEPAGE);
		if (procmem__read(pid, r.data, len, r.lo)) {
			munmap(r.data, len);	/* gone, or not readable: read object by object */
		} else {
			m->r[kept++] = r;
			m->copied += len;
		}
		if (i == m->n - 1)
			m->n = kept;
	}
	return 0;
}

void heapmem__free(struct heapmem *m)
{
	for (size_t i = 0; i < m->n; i++)
		munmap(m->r[i].data, m->r[i].hi - m->r[i].lo);
	free(m->r);
}

long heapmem__region(const struct heapmem *m, __u64 addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {		/* the last region starting at or below addr */
		size_t mid = (lo + hi) / 2;

		if (m->r[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr < m->r[lo - 1].hi ? (long)lo - 1 : -1;
}

const unsigned char *heapmem__view(const struct heapmem *m, __u64 addr, size_t n)
{
	long i = heapmem__region(m, addr);

	if (i >= 0 && addr + n >= addr && addr + n <= m->r[i].hi)
		return m->r[i].data + (addr - m->r[i].lo);
	return NULL;
}

int heapmem__read(struct heapmem *m, void *dst, size_t n, __u64 addr)
{
	const unsigned char *v = heapmem__view(m, addr, n);

	if (v) {
		memcpy(dst, v, n);
		return 0;
	}
	return procmem__read(m->pid, dst, n, addr);
}

