// SPDX-License-Identifier: MIT
/*
 * allocs.c - the sampler's allocation clock, its user side (bpf/alloc.h):
 * the sampling tables, the uprobe session on each VM's allocator, and what
 * the rows count besides bytes (objects, and what is still in use).
 *
 * A VM allocates through g->allocf: LuaJIT's own allocator (lj_alloc_f), or
 * a host's (lua_newstate(f, ud), lua_setallocf). Its address is read from
 * each global_State found and probed only where it is the entry of a
 * function of a file the process maps, as its .eh_frame and a decode from
 * there say (code_sites__verify): a breakpoint anywhere else could corrupt
 * the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "base/procmem.h"
#include "base/say.h"
#include "luajit/code_sites.h"
#include "luajit/codemap.h"
#include "luajit/elf_file.h"
#include "sampler_int.h"

/* The value of BPF_TRACE_UPROBE_SESSION in the running kernel's enum
 * bpf_attach_type (its BTF), or -1 when it has none (before Linux 6.13). */
static int uprobe_session_type(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	const struct btf_type *t;
	const struct btf_enum *e;
	int id, ret = -1;

	if (!btf)
		return -1;
	id = btf__find_by_name_kind(btf, "bpf_attach_type", BTF_KIND_ENUM);
	if (id > 0 && (t = btf__type_by_id(btf, id))) {
		e = btf_enum(t);
		for (int i = 0; i < btf_vlen(t); i++, e++)
			if (!strcmp(btf__name_by_offset(btf, e->name_off), "BPF_TRACE_UPROBE_SESSION"))
				ret = e->val;
	}
	btf__free(btf);
	return ret;
}

int allocs__configure(struct sampler *s, const struct sampler_opts *o, char *err, size_t errsz)
{
	int type = uprobe_session_type();
	const double n = NUPP_ALLOC_EXP;

	if (type < 0) {
		snprintf(err, errsz, "--alloc needs uprobe sessions (Linux 6.13 or later): this "
			 "kernel has none");
		return -1;
	}
	s->session_type = type;
	bpf_program__set_expected_attach_type(s->skel->progs.on_alloc, type);
	s->skel->rodata->alloc_mean = o->alloc_mean;
	/* Cell i: the mean of -ln(u) over [a, b) = [i/n, (i+1)/n), so that the
	 * draws' mean is exactly 1: (F(b) - F(a)) * n, F(u) = u - u ln u. */
	for (int i = 0; i < NUPP_ALLOC_EXP; i++) {
		double a = i / n, b = (i + 1) / n;
		double fa = a > 0 ? a - a * log(a) : 0, fb = b - b * log(b);

		s->skel->rodata->alloc_exp[i] = (__u32)lround((fb - fa) * n *
							     (1 << NUPP_ALLOC_EXP_SHIFT));
	}
	for (int i = 0; i <= NUPP_ALLOC_SCALE; i++) {
		double x = (double)i / NUPP_ALLOC_STEPS;

		s->skel->rodata->alloc_scale[i] = (__u32)lround(65536.0 * (i ? x / -expm1(-x) : 1));
	}
	bpf_map__set_max_entries(s->skel->maps.alloc_objects, s->table_len);
	return 0;
}

/* A uprobe session on tg's process at file offset off of path. */
static int attach_session(struct sampler *s, struct target *tg, const char *path, __u64 off)
{
	return uprobe__link_create(bpf_program__fd(s->skel->progs.on_alloc), s->session_type,
				   tg->pid, path, off, 0);
}

/* Where allocator at (a runtime address of tg's process) lies: a file, the
 * function's address in it (*vaddr) and its file offset (*off). LuaJIT's
 * file, or another one the process maps (a host's allocator given to
 * lua_newstate), reached through map_files across mount namespaces as the
 * target's own file is. 0, or -1 with the reason in why. */
static int allocator_file(struct target *tg, __u64 at, char *path, size_t pathsz, __u64 *vaddr,
			  __u64 *off, char *why, size_t whysz)
{
	const struct lj_target *t = tg->t;
	const struct code_mapping *m;
	struct elf_file *ef;

	if ((*off = lj_target__file_offset(t, at - t->bias))) {
		snprintf(path, pathsz, "%s", t->path);
		*vaddr = at - t->bias;
		return 0;
	}
	if (!tg->code || !(m = codemap__find(tg->code, at))) {
		snprintf(why, whysz, "in no file's code");
		return -1;
	}
	snprintf(path, pathsz, "/proc/%d/map_files/%llx-%llx", tg->pid,
		 (unsigned long long)m->start, (unsigned long long)m->limit);
	*off = m->off + (at - m->start);
	ef = elf_file__open(path);
	*vaddr = ef ? elf_file__offset_to_vaddr(ef, *off) : ELF_FILE_NOADDR;
	elf_file__close(ef);
	if (*vaddr == ELF_FILE_NOADDR) {
		snprintf(why, whysz, "%s does not map it", m->file);
		return -1;
	}
	return 0;
}

/* Probe allocator at (a runtime address of tg's process) unless it is
 * probed already; a note when it cannot be. */
static void watch_allocator(struct sampler *s, struct target *tg, __u64 at)
{
	char why[256] = "", path[PATH_MAX];
	__u64 vaddr, site, off;
	int fd;

	for (int i = 0; i < tg->nallocs; i++)
		if (tg->alloc_at[i] == at)
			return;
	if (tg->nallocs == TARGET_ALLOCATORS)
		return;
	tg->alloc_at[tg->nallocs] = at;
	tg->alloc_fd[tg->nallocs++] = -1;
	if (allocator_file(tg, at, path, sizeof(path), &vaddr, &off, why, sizeof(why))) {
		say__note("note: PID %d: its VM allocates with a function at 0x%llx, %s: "
			  "its allocations are not sampled", tg->pid, (unsigned long long)at, why);
		return;
	}
	if (code_sites__entry_probe(path, vaddr, &tg->t->layout, &site, why, sizeof(why))) {
		say__note("note: PID %d: its VM's allocator (0x%llx) did not verify as a "
			  "function's entry (%s): its allocations are not sampled", tg->pid,
			  (unsigned long long)at, why);
		return;
	}
	/* The site lies in the allocator's function, in its segment: as far
	 * into the file as into the function. */
	fd = attach_session(s, tg, path, off + (site - vaddr));
	if (fd < 0) {
		say__note("note: PID %d: cannot probe its VM's allocator: %s", tg->pid,
			  strerror(errno));
		return;
	}
	tg->alloc_fd[tg->nallocs - 1] = fd;
}

/* g->gc.currentwhite follows gc.total and gc.threshold (two GCSize) in
 * every revision's GCState; it holds LJ_GC_WHITE0 or LJ_GC_WHITE1 (1 or 2),
 * with LJ_GC_FIXED (0x20) from lua_newstate on, until lua_close sets 0x43
 * (a scan may find it closing). Checked in the process's only VM before the kernel
 * reads it (vm_closing() in bpf/alloc.h); not used with several VMs. */
static void watch_vm_close(struct sampler *s, struct target *tg)
{
	__u32 at = tg->t->layout.g_gc_total + 2 * 8;
	__u8 white = 0;

	if (tg->t->ngs == 1 && !procmem__read(tg->pid, &white, 1, tg->t->gs[0] + at) &&
	    (white == 0x21 || white == 0x22 || white == 0x43))
		SET_LIVE(s, tg, g_currentwhite, at);
	else
		SET_LIVE(s, tg, g_currentwhite, 0);
}

/* Every VM of tg found so far: its allocator (g->allocf, the first field
 * before g->gc: allocf and allocd precede GCState, whose first field is
 * gc.total, in every layout) probed. */
void allocs__watch(struct sampler *s, struct target *tg)
{
	const struct lj_target *t = tg->t;
	__u64 at;

	if (!t->layout.g_gc_total) {
		/* Said once per target: the scan comes back for new VMs. */
		if (!tg->alloc_refused)
			say__note("note: PID %d: %s: its layout does not describe its heap (a "
				  "revision before 2020-06?): its allocations are not sampled",
				  tg->pid, t->shown);
		tg->alloc_refused = true;
		return;
	}
	for (int i = 0; i < t->ngs; i++)
		if (!procmem__read(tg->pid, &at, 8, t->gs[i] + t->layout.g_gc_total - 16) && at)
			watch_allocator(s, tg, at);
	watch_vm_close(s, tg);
}

void allocs__unwatch(struct target *tg)
{
	for (int i = 0; i < tg->nallocs; i++)
		if (tg->alloc_fd[i] >= 0)
			close(tg->alloc_fd[i]);
	tg->nallocs = 0;
}

/* The rows' objects and what is still in use, from the kernel's tables
 * (bytes are in the slots' state[] and came with the rows). */
/* Blocks in use read at once: a batch of the kernel's table, bucket by
 * bucket, so that a block freed meanwhile neither restarts the walk nor
 * counts twice (as bpf_map_get_next_key from a deleted key would). */
#define LIVE_BATCH	4096

/* Add the blocks in use of a batch to the rows (objects[2 * row + 1]: blocks
 * in fixed point); how many were in use. */
static __u64 take_live(struct sampler *s, const struct nupp_alloc_live *live, __u32 n,
		       __u64 *objects)
{
	for (__u32 i = 0; i < n; i++) {
		long row = live[i].slot < s->table_len ? s->slot_row[live[i].slot] - SLOT_SEEN : -1;

		if (row < 0)
			continue;
		s->rows.rows[row].alloc.inuse_bytes += live[i].bytes;
		objects[2 * row + 1] += live[i].objects;
	}
	return n;
}

int allocs__rows(struct sampler *s, struct sampler_stats *st)
{
	int fd = bpf_map__fd(s->skel->maps.alloc_live), err = 0;
	size_t nrows = s->rows.nrows;
	struct nupp_alloc_key *keys = calloc(LIVE_BATCH, sizeof(*keys));
	struct nupp_alloc_live *live = calloc(LIVE_BATCH, sizeof(*live));
	__u64 *objects = calloc(nrows ? nrows : 1, sizeof(*objects) * 2), token = 0;
	bool first = true;

	if (!keys || !live || !objects) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < s->nknown; k++) {
		long row = s->slot_row[s->known[k]] - SLOT_SEEN;

		if (row >= 0)
			objects[2 * row] += __atomic_load_n(&s->alloc_objects[s->known[k]],
							    __ATOMIC_RELAXED);
	}
	for (size_t i = 0; i < nrows; i++)
		s->rows.rows[i].alloc = (struct profile_alloc){ 0 };
	for (;;) {
		__u32 n = LIVE_BATCH;
		int ret = bpf_map_lookup_batch(fd, first ? NULL : &token, &token, keys, live, &n, NULL);

		first = false;
		if (ret && errno != ENOENT)
			break;		/* what was read stands: a partial count */
		st->alloc_live += take_live(s, live, n, objects);
		if (ret)
			break;		/* ENOENT: the last batch */
	}
	for (size_t i = 0; i < nrows; i++) {
		s->rows.rows[i].alloc.objects = (objects[2 * i] + NUPP_ALLOC_ONE / 2) / NUPP_ALLOC_ONE;
		s->rows.rows[i].alloc.inuse_objects =
			(objects[2 * i + 1] + NUPP_ALLOC_ONE / 2) / NUPP_ALLOC_ONE;
	}
	st->alloc_untracked = s->skel->bss->alloc_untracked;
out:
	free(keys);
	free(live);
	free(objects);
	return err;
}
