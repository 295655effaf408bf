// SPDX-License-Identifier: MIT
/* codemap.c - which file of a process a code address comes from (codemap.h). */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "codemap.h"
#include "base/procmem.h"
#include "base/util.h"

struct codemap {
	pid_t pid;
	struct code_mapping *maps;	/* file-backed executable mappings */
	size_t n, cap;
	bool may_read;			/* a miss may read the maps again */
};

struct codemap *codemap__new(pid_t pid)
{
	struct codemap *m = calloc(1, sizeof(*m));

	if (m) {
		m->pid = pid;
		m->may_read = true;
	}
	return m;
}

static void clear(struct codemap *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->maps[i].file);
	m->n = 0;
}

void codemap__free(struct codemap *m)
{
	if (!m)
		return;
	clear(m);
	free(m->maps);
	free(m);
}

void codemap__age(struct codemap *m)
{
	m->may_read = true;
}

/* Keep mapping pm when it holds a file's code; 0 or -1 when out of memory. */
static int keep(struct codemap *m, const struct proc_mapping *pm)
{
	if (pm->perms[2] != 'x' || pm->file[0] != '/')
		return 0;
	if (ARRAY_ROOM(m->maps, m->n, m->cap, 16))
		return -1;
	m->maps[m->n] = (struct code_mapping){ pm->start, pm->end, pm->off, strdup(pm->file) };
	if (!m->maps[m->n].file)
		return -1;
	m->n++;
	return 0;
}

static void read_maps(struct codemap *m)
{
	FILE *f = procmem__maps_open(m->pid);
	struct proc_mapping pm;

	clear(m);
	m->may_read = false;
	if (!f)
		return;
	while (procmem__maps_next(f, &pm))
		if (keep(m, &pm))
			break;
	fclose(f);
}

static const struct code_mapping *lookup(const struct codemap *m, __u64 addr)
{
	for (size_t i = 0; i < m->n; i++)
		if (addr >= m->maps[i].start && addr < m->maps[i].limit)
			return &m->maps[i];
	return NULL;
}

const struct code_mapping *codemap__find(struct codemap *m, __u64 addr)
{
	const struct code_mapping *c = lookup(m, addr);

	if (c || !m->may_read)
		return c;
	read_maps(m);
	return lookup(m, addr);
}
