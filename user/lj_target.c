// SPDX-License-Identifier: MIT
/* lj_target.c - find and identify the LuaJIT inside a target process. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "elf_file.h"
#include "lj_target.h"
#include "procmem.h"

/* GC object types as the gct byte stores them (~LJ_T*): thread and string. */
#define GCT_THREAD	6
#define GCT_STR		4

const struct lj_build *lj_target__build(const struct lj_target *t)
{
	return t->build ? t->build : &t->local;
}

__u64 lj_target__sym(const struct lj_target *t, const char *name)
{
	return lj_build__sym(lj_target__build(t), name);
}

__u64 lj_target__file_offset(const struct lj_target *t, __u64 vaddr)
{
	struct elf_file *ef = elf_file__open(t->path);
	__u64 off;

	if (!ef)
		return 0;
	off = elf_file__vaddr_to_offset(ef, vaddr);
	elf_file__close(ef);
	return off == ELF_FILE_NOADDR ? 0 : off;
}

/* The registry entry whose .text digest equals the file's, or NULL. */
static const struct lj_build *registry_match(struct elf_file *ef)
{
	__u64 size = elf_file__text_size(ef);
	unsigned char sha[32];
	int i, hashed = 0;

	for (i = 0; i < lj_nknown_builds; i++) {
		const struct lj_build *b = &lj_known_builds[i];

		if (b->text_size != size)
			continue;
		if (!hashed && elf_file__text_sha256(ef, sha))
			return NULL;
		hashed = 1;
		if (!memcmp(sha, b->text_sha256, 32))
			return b;
	}
	return NULL;
}

/* A build with .symtab that the registry does not know: symbols from the file,
 * the layout of the registry tree its API exports point to (luajit2 exports
 * lua_setexdata). lj_target__scan_vms() then checks the layout in memory. */
static int symbolized_build(struct lj_target *t, struct elf_file *ef)
{
	const struct lj_build *like = NULL;
	bool b_tree = elf_file__sym(ef, "lua_setexdata", true) != 0;
	int i, n = 0;

	if (!elf_file__sym(ef, "lj_vm_asm_begin", false) || !lj_nknown_builds)
		return 0;
	for (i = 0; i < lj_nknown_builds; i++)
		if (!strcmp(lj_known_builds[i].tree, b_tree ? "luajit2" : "luajit"))
			like = &lj_known_builds[i];
	if (!like)
		like = &lj_known_builds[0];
	t->local = *like;
	t->local.id = "symbolized";
	t->local.package = "external";
	memset(t->local.text_sha256, 0, sizeof(t->local.text_sha256));
	elf_file__text_sha256(ef, t->local.text_sha256);
	t->local.text_size = elf_file__text_size(ef);
	for (const struct lj_sym *s = like->syms; s && s->name && n < 47; s++) {
		__u64 a = strchr(s->name, '@') ? 0 : elf_file__sym(ef, s->name, false);

		if (a)
			t->local_syms[n++] = (struct lj_sym){ s->name, a };
	}
	t->local_syms[n] = (struct lj_sym){ NULL, 0 };
	t->local.syms = t->local_syms;
	return 1;
}

/* A map_files path lasts as long as that one mapping (a loader still at work
 * replaces mappings); the file through the process's root lasts as long as
 * the file. Keep map_files only for a file deleted or replaced on disk. */
static void stable_path(struct lj_target *t)
{
	char path[sizeof(t->path)];
	struct stat a, b;

	if (snprintf(path, sizeof(path), "/proc/%d/root%.4000s", t->pid, t->shown) >= (int)sizeof(path) ||
	    stat(path, &a) || stat(t->path, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return;
	snprintf(t->path, sizeof(t->path), "%s", path);
}

/* Is the executable mapping [start, +) of file offset off the LuaJIT? */
static int identify(struct lj_target *t, const char *path, __u64 start, __u64 off,
		    char *hint, size_t hintsz)
{
	struct elf_file *ef = elf_file__open(path);
	__u64 vaddr;
	int found = 0;

	if (!ef)
		return 0;
	t->build = registry_match(ef);
	if (t->build || symbolized_build(t, ef)) {
		vaddr = elf_file__offset_to_vaddr(ef, off);
		if (vaddr != ELF_FILE_NOADDR) {
			t->bias = start - vaddr;
			found = 1;
		}
	} else if (elf_file__sym(ef, "luaJIT_setmode", true) && !hint[0]) {
		unsigned char sha[32];
		char hex[17] = "";

		if (!elf_file__text_sha256(ef, sha))
			for (int i = 0; i < 8; i++)
				sprintf(hex + 2 * i, "%02x", sha[i]);
		snprintf(hint, hintsz, "%%s: LuaJIT found in %%s, but this build is unknown "
			 "(.text sha256 %s…) and stripped; run it with a build that has "
			 "symbols (.symtab), or add the build to the registry "
			 "(scripts/gen-registry.py)", hex);
	}
	elf_file__close(ef);
	return found;
}

/* One line of /proc/PID/maps. */
struct mapping {
	unsigned long start, end, off;
	char perms[8];
	char file[PATH_MAX];		/* "" for an anonymous mapping */
};

static FILE *maps_open(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	return fopen(path, "re");
}

/* The next mapping of f: 1, or 0 at its end. */
static int maps_next(FILE *f, struct mapping *m)
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

/* A mapping of a file's code: where LuaJIT can be. */
static bool maps_code(const struct mapping *m)
{
	return m->perms[2] == 'x' && m->file[0] == '/';
}

static __u64 fnv1a(__u64 h, const void *p, size_t n)
{
	for (const unsigned char *c = p; n--; c++)
		h = (h ^ *c) * 1099511628211ULL;
	return h;
}

__u64 lj_target__code_digest(pid_t pid)
{
	__u64 h = 14695981039346656037ULL;	/* FNV-1a 64 */
	FILE *f = maps_open(pid);
	struct mapping m;

	if (!f)
		return 0;
	while (maps_next(f, &m)) {
		if (!maps_code(&m))
			continue;
		h = fnv1a(h, &m.start, sizeof(m.start));
		h = fnv1a(h, &m.end, sizeof(m.end));
		h = fnv1a(h, &m.off, sizeof(m.off));
		h = fnv1a(h, m.file, strlen(m.file));
	}
	fclose(f);
	return h;
}

int lj_target__open(struct lj_target *t, pid_t pid, char *err, size_t errsz)
{
	int ret = lj_target__identify(t, pid, err, errsz);

	if (ret)
		return ret;
	lj_target__scan_vms(t);
	return 0;
}

int lj_target__identify(struct lj_target *t, pid_t pid, char *err, size_t errsz)
{
	char hint[512] = "", hint_path[PATH_MAX] = "";
	struct mapping m;
	FILE *f;
	int found = 0;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	if (kill(pid, 0) && errno == ESRCH) {
		snprintf(err, errsz, "no process with PID %d", pid);
		return -1;
	}
	f = maps_open(pid);
	if (!f) {
		snprintf(err, errsz, "cannot read /proc/%d/maps: %s", pid, strerror(errno));
		return -1;
	}
	while (!found && maps_next(f, &m)) {
		if (!maps_code(&m))
			continue;
		/* map_files reaches the mapped file even across mount namespaces
		 * or when it was deleted or replaced on disk. */
		snprintf(t->path, sizeof(t->path), "/proc/%d/map_files/%lx-%lx", pid, m.start, m.end);
		found = identify(t, t->path, m.start, m.off, hint, sizeof(hint));
		if (found) {
			snprintf(t->shown, sizeof(t->shown), "%s", m.file);
			stable_path(t);
		}
		else if (hint[0] && !hint_path[0])
			snprintf(hint_path, sizeof(hint_path), "%s", m.file);
	}
	fclose(f);
	if (!found) {
		if (hint[0]) {
			snprintf(err, errsz, hint, "unsupported build", hint_path);
			return LJ_TARGET_UNSUPPORTED;
		}
		snprintf(err, errsz, "process %d does not contain LuaJIT", pid);
		return -1;
	}
	t->layout = lj_target__build(t)->layout;
	t->vm_lo = lj_target__sym(t, "lj_vm_asm_begin") + t->bias;
	t->vm_hi = lj_target__sym(t, "lj_vm_ffi_call") + t->bias;
	return 0;
}

/* Is there a GG_State (main lua_State followed by its global_State) at p?
 * buf holds the target's memory from p on, n bytes of it. */
static int gg_at(const struct lj_layout *lj, __u64 p, const __u8 *buf, size_t n)
{
	__u64 g = p + lj->gg_g, v;

	if (n < lj->gg_g + lj->g_mainthref + 8 || n < lj->gg_g + lj->g_strempty + 16)
		return 0;
	memcpy(&v, buf + lj->L_glref, 8);		/* L->glref == &GG->g */
	if (v != g)
		return 0;
	memcpy(&v, buf + lj->gg_g + lj->g_mainthref, 8);	/* g->mainthref == &GG->L */
	if ((v & LJ_GCVMASK) != p || buf[lj->gc_gct] != GCT_THREAD)
		return 0;
	return buf[lj->gg_g + lj->g_strempty + lj->gc_gct] == GCT_STR;	/* g->strempty */
}

/* Scan the process's anonymous writable memory for GG_States. */
int lj_target__scan_vms(struct lj_target *t)
{
	enum { CHUNK = 1 << 20, OVERLAP = 4096 };
	const __u64 budget = 4ULL << 30;	/* bytes; a huge heap is not worth more */
	struct mapping m;
	__u64 scanned = 0;
	__u8 *buf;
	FILE *f;

	f = maps_open(t->pid);
	buf = malloc(CHUNK + OVERLAP);
	if (!f || !buf)
		goto out;
	t->ngs = 0;
	while (scanned < budget && maps_next(f, &m)) {
		if (m.perms[0] != 'r' || m.perms[1] != 'w' || (m.file[0] && strcmp(m.file, "[heap]")))
			continue;
		for (__u64 a = m.start; a < m.end; a += CHUNK) {
			size_t n = m.end - a < CHUNK + OVERLAP ? m.end - a : CHUNK + OVERLAP;

			if (procmem__read(t->pid, buf, n, a))
				break;
			scanned += n;
			for (size_t i = 0; i < n && i < CHUNK; i += 16)
				if (gg_at(&t->layout, a + i, buf + i, n - i) && t->ngs < LJ_TARGET_MAX_VMS)
					t->gs[t->ngs++] = a + i + t->layout.gg_g;
		}
	}
out:
	if (f)
		fclose(f);
	free(buf);
	return t->ngs;
}
