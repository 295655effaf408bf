// SPDX-License-Identifier: MIT
/*
 * cfunc_names.c - C functions named by symbol, or by file and ELF address.
 *
 * A name is looked up once per address and kept: a Lua stack holds few C
 * functions (its root, a host's registered functions), met again at every
 * poll. Files are read through /proc/PID/map_files, which reaches a file in
 * another mount namespace or one replaced on disk.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cfunc_names.h"
#include "codemap.h"
#include "elf_file.h"
#include "base/util.h"

#define NAME_MAX_LEN 128

struct named {
	__u64 addr;
	char name[NAME_MAX_LEN];	/* "" for an address in no file */
};

struct cfunc_names {
	pid_t pid;
	struct codemap *maps;
	struct named *known;
	size_t n, cap;
};

struct cfunc_names *cfunc_names__new(pid_t pid, struct codemap *maps)
{
	struct cfunc_names *c = malloc(sizeof(*c));

	if (c)
		*c = (struct cfunc_names){ .pid = pid, .maps = maps };
	return c;
}

void cfunc_names__free(struct cfunc_names *c)
{
	if (!c)
		return;
	free(c->known);
	free(c);
}

static void name_from_file(struct cfunc_names *c, const struct code_mapping *m, __u64 addr,
			   char *out, size_t size)
{
	const char *base = strrchr(m->file, '/') ? strrchr(m->file, '/') + 1 : m->file;
	__u64 off = addr - m->start + m->off, vaddr = off;
	/* A file replaced or deleted on disk since it was mapped is still the
	 * same build: named as before, without the maps' " (deleted)". */
	int len = (int)strlen(base);
	char path[96];

	if (len > 10 && !strcmp(base + len - 10, " (deleted)"))
		len -= 10;
	struct elf_file *ef;
	const char *sym = NULL;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", c->pid,
		 (unsigned long long)m->start, (unsigned long long)m->limit);
	if ((ef = elf_file__open(path))) {
		__u64 v = elf_file__offset_to_vaddr(ef, off);

		if (v != ELF_FILE_NOADDR)
			vaddr = v;
		sym = elf_file__func_at(ef, vaddr);
	}
	if (sym && sym[0])
		snprintf(out, size, "%s", sym);
	else
		snprintf(out, size, "%.*s+0x%llx", len, base, (unsigned long long)vaddr);
	elf_file__close(ef);
}

const char *cfunc_names__name(struct cfunc_names *c, __u64 addr)
{
	const struct code_mapping *m;
	struct named *k;

	for (size_t i = 0; i < c->n; i++)
		if (c->known[i].addr == addr)
			return c->known[i].name;
	m = codemap__find(c->maps, addr);
	if (ARRAY_ROOM(c->known, c->n, c->cap, 16))
		return "";
	k = &c->known[c->n];
	k->addr = addr;
	k->name[0] = '\0';
	if (m)
		name_from_file(c, m, addr, k->name, sizeof(k->name));
	/* A miss is not kept: a library loaded since may hold the address
	 * (codemap reads the maps again at most once per age). */
	if (m)
		c->n++;
	return k->name;
}
