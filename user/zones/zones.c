// SPDX-License-Identifier: MIT
/*
 * zones.c - the zone paths of a target process (zones.h).
 *
 * Looks through the files the target maps, each once, for the symbol
 * nupp_zone_state, checks its magic in the target's memory, and opens the
 * gate by attaching bpf/zones.bpf.c to the USDT probe nupp:zone in that
 * file. Zone ids are then named by the paths in the target's table, each
 * read once and kept.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "luajit/elf_file.h"
#include "base/keymap.h"
#include "base/procmem.h"
#include "zone_state.h"
#include "zones.h"
#include "base/libbpf_setup.h"
#include "zones.skel.h"

struct zones {
	pid_t pid;
	__u64 state;			/* address of nupp_zone_state, 0 unknown */
	struct keymap checked;		/* files already looked at */
	struct zones_bpf *skel;
	struct bpf_link *gate;		/* while attached, the gate is open */
	char **paths;			/* cache: paths[id], NULL unknown */
	__u32 npaths;
};

struct zones *zones__new(pid_t pid)
{
	struct zones *z = calloc(1, sizeof(*z));

	if (z)
		z->pid = pid;
	return z;
}

void zones__free(struct zones *z)
{
	if (!z)
		return;
	bpf_link__destroy(z->gate);
	zones_bpf__destroy(z->skel);
	keymap__free(&z->checked);
	for (__u32 i = 0; i < z->npaths; i++)
		free(z->paths[i]);
	free(z->paths);
	free(z);
}

/* Attach to nupp:zone in the file: the kernel raises the gate semaphore. */
static void open_gate(struct zones *z, const char *file)
{
	z->skel = zones_bpf__open_opts(libbpf_setup__open_opts());
	if (z->skel && zones_bpf__load(z->skel)) {
		zones_bpf__destroy(z->skel);
		z->skel = NULL;
	}
	if (!z->skel)
		return;
	z->gate = bpf_program__attach_usdt(z->skel->progs.on_zone_register, z->pid, file,
					   "nupp", "zone", NULL);
	if (!z->gate)
		fprintf(stderr, "nupp-bpf: warning: cannot open the zone gate of PID %d: %s\n",
			z->pid, strerror(errno));
}

/* Does the mapped file define nupp_zone_state? Then note its address. */
static int check_file(struct zones *z, const char *file, unsigned long start, unsigned long off)
{
	struct elf_file *ef = elf_file__open(file);
	__u64 sym, vaddr;
	__u32 magic = 0;

	if (!ef)
		return 0;
	sym = elf_file__sym(ef, "nupp_zone_state", true);
	vaddr = elf_file__offset_to_vaddr(ef, off);
	elf_file__close(ef);
	if (!sym || vaddr == ELF_FILE_NOADDR)
		return 0;
	sym += start - vaddr;
	if (procmem__read(z->pid, &magic, 4, sym + offsetof(struct nupp_zone_state, magic)) ||
	    magic != NUPP_ZONE_MAGIC)
		return 0;
	z->state = sym;
	open_gate(z, file);
	return 1;
}

int zones__refresh(struct zones *z)
{
	char maps[64], line[PATH_MAX + 128];
	int found = 0;
	FILE *f;

	if (z->state)
		return 0;
	snprintf(maps, sizeof(maps), "/proc/%d/maps", z->pid);
	f = fopen(maps, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long start, end, off;
		char file[PATH_MAX] = "", path[PATH_MAX];

		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095[^\n]", &start, &end, &off, file) < 4 ||
		    file[0] != '/' || keymap__get(&z->checked, file, strlen(file)) != -1)
			continue;
		keymap__put(&z->checked, file, strlen(file), 1);
		snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", z->pid, start, end);
		found = check_file(z, path, start, off);
	}
	fclose(f);
	return found;
}

__u64 zones__state_addr(const struct zones *z)
{
	return z->state;
}

__u64 zones__current_addr(const struct zones *z)
{
	return z->state ? z->state + offsetof(struct nupp_zone_state, current) : 0;
}

/* Read path id from the target's table. */
static char *read_path(struct zones *z, __u32 id)
{
	__u64 st = z->state, table = 0, str = 0;
	__u32 n = 0;
	char buf[NUPP_ZONE_PATH_MAX];

	if (procmem__read(z->pid, &n, 4, st + offsetof(struct nupp_zone_state, npaths)) || id > n ||
	    procmem__read(z->pid, &table, 8, st + offsetof(struct nupp_zone_state, paths)) ||
	    procmem__read(z->pid, &str, 8, table + 8ULL * id))
		return NULL;
	/* Read up to the NUL without crossing into a page past the string. */
	for (size_t got = 0, n; got < sizeof(buf); got += n) {
		n = 4096 - ((str + got) & 4095);
		if (n > sizeof(buf) - got)
			n = sizeof(buf) - got;
		if (procmem__read(z->pid, buf + got, n, str + got))
			return NULL;
		if (memchr(buf + got, '\0', n))
			return strdup(buf);
	}
	return NULL;
}

const char *zones__path(struct zones *z, __u32 id)
{
	if (!id || !z || !z->state)
		return "";
	if (id >= z->npaths) {
		char **paths = realloc(z->paths, (id + 64) * sizeof(*paths));

		if (!paths)
			return "";
		memset(paths + z->npaths, 0, (id + 64 - z->npaths) * sizeof(*paths));
		z->paths = paths;
		z->npaths = id + 64;
	}
	if (!z->paths[id])
		z->paths[id] = read_path(z, id);
	return z->paths[id] ? z->paths[id] : "";
}
