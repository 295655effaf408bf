// SPDX-License-Identifier: MIT
/*
 * lj_target.c - find and identify the LuaJIT inside a target process
 * (lj_target.h).
 *
 * Each executable file mapping is opened (through map_files, or the
 * process's root) and checked: a registry build by its .text digest, any
 * other LuaJIT described from its own file (lj_derive.c) once per build and
 * through the build cache, its probe sites decoded again before use. Its
 * VMs are then found by scanning the process's anonymous writable memory
 * for a GG_State that verifies, which also picks a derived build's layout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "build_cache.h"
#include "elf_file.h"
#include "lj_target.h"
#include "base/procmem.h"
#include "base/util.h"


const struct lj_build *lj_target__build(const struct lj_target *t)
{
	return t->build ? t->build : &t->local;
}

__u64 lj_target__sym(const struct lj_target *t, const char *name)
{
	return lj_build__sym(lj_target__build(t), name);
}

__u64 lj_target__func(const struct lj_target *t, const char *name)
{
	struct elf_file *ef = elf_file__open(t->path);
	__u64 at = ef ? elf_file__func(ef, name) : 0;

	elf_file__close(ef);
	return at;
}

__u64 lj_target__file_offset(const struct lj_target *t, __u64 vaddr)
{
	struct elf_file *ef = elf_file__open(t->path);
	__u64 off = ef ? elf_file__vaddr_to_offset(ef, vaddr) : ELF_FILE_NOADDR;

	elf_file__close(ef);
	return off == ELF_FILE_NOADDR ? 0 : off;
}

/* The registry entry whose .text digest equals the build's (k), or NULL. */
static const struct lj_build *registry_match(struct elf_file *ef, const struct build_key *k)
{
	__u64 size = elf_file__text_size(ef);

	for (int i = 0; k->file_size && i < lj_nknown_builds; i++) {
		const struct lj_build *b = &lj_known_builds[i];

		if (b->text_size == size && !memcmp(k->text_sha256, b->text_sha256, 32))
			return b;
	}
	return NULL;
}

/* Name tables of a revision into a build description. */
static void use_vmdef(struct lj_build *b, const struct lj_vmdef *v)
{
	if (!v)
		return;
	b->ffnames = v->ffnames, b->nffnames = v->nffnames;
	b->bcnames = v->bcnames, b->nbcnames = v->nbcnames;
	b->irnames = v->irnames, b->nirnames = v->nirnames;
	b->traceerr = v->traceerr, b->ntraceerr = v->ntraceerr;
	b->bcmode = v->bcmode;
	b->mmnames = v->mmnames, b->nmmnames = v->nmmnames;
	b->bcm_base = v->bcm_base, b->bcm_dst = v->bcm_dst;
	b->mm_call = v->mm_call, b->mm_max = v->mm_max;
}

/* Take candidate i of a derived build as its layout and names. */
static void use_candidate(struct lj_target *t, int i)
{
	const struct lj_candidate *c = &t->derived.cands[i];
	const struct lj_revision *r = c->rev;

	t->layout = t->local.layout = *c->layout;
	t->rev = r;
	use_vmdef(&t->local, r ? r->vmdef : NULL);
	char rev[96] = "";

	if (r && r->commit)
		snprintf(rev, sizeof(rev), " and names of %s %.12s", r->fork, r->commit);
	else if (r)
		snprintf(rev, sizeof(rev), " and names of %s", r->source);
	snprintf(t->local_desc, sizeof(t->local_desc), "%s, %s%s%s, layout from %s%s, sites from %s%s",
		 t->derived.version.text, t->derived.fork, t->derived.options[0] ? ", " : "",
		 t->derived.options, c->from, rev, t->derived.sites_from,
		 t->cached ? " (cached)" : "");
}

/* Sites read from the build cache are decoded again at once, as a fresh
 * derivation's would be before any probe: an entry that does not hold is
 * not used (and dropped by the caller). */
static bool cached_sites_hold(const char *path, const struct lj_code_sites *s,
			      const struct lj_layout *lj)
{
	if (s->gc_cycle && code_sites__verify(path, s->gc_cycle, CODE_SITE_FUNC_ENTRY, lj, NULL, 0))
		return false;
	for (int i = -1; s->abort_site && i < s->abort_nmore; i++)
		if (code_sites__verify(path, i < 0 ? s->abort_site : s->abort_more[i],
				       CODE_SITE_TRACENO_JCC, lj, NULL, 0))
			return false;
	return true;
}

/* lj_derive() once per build in a process, and across runs through the
 * build cache: the workers of a server share one file, and a session may
 * follow a thousand of them. What is kept is what lj_derive() found; every
 * use verifies it again (the layout in each VM, the sites before each
 * probe). Refusals are not kept: a debug file installed later changes them. */
static struct derived_build {
	struct build_key key;
	struct lj_derived d;
	int ret;
	bool cached;		/* read from the build cache */
	char err[512];
} derived_builds[8];

static struct derived_build *derived_of(const struct build_key *k)
{
	for (int i = 0; i < 8; i++)	/* a key of size 0: none, or forgotten */
		if (k->file_size && !memcmp(&derived_builds[i].key, k, sizeof(*k)))
			return &derived_builds[i];
	return NULL;
}

static int derive_once(struct lj_target *t, struct elf_file *ef, const char *path, const char *shown,
		       const char *root, char *err, size_t errsz)
{
	static int next;
	struct derived_build *c = derived_of(&t->key);
	struct lj_derived *d = &t->derived;

	if (!c) {
		c = &derived_builds[next++ % 8];
		c->key = t->key;
		c->cached = t->key.file_size && build_cache__load_derived(&t->key, &c->d) &&
			    cached_sites_hold(path, &c->d.sites, c->d.cands[0].layout == &c->d.dwarf
						  ? &c->d.dwarf : c->d.cands[0].layout);
		c->ret = c->cached ? 0 : lj_derive(ef, path, shown, root, &c->d, c->err, sizeof(c->err));
		if (!c->cached && !c->ret && t->key.file_size)
			build_cache__store_derived(&t->key, &c->d);
	}
	*d = c->d;
	for (int i = 0; i < d->ncands; i++)	/* the DWARF layout: d's own copy */
		if (d->cands[i].layout == &c->d.dwarf)
			d->cands[i].layout = &d->dwarf;
	t->cached = c->cached;
	if (c->ret)
		snprintf(err, errsz, "%s", c->err);
	return c->ret;
}

void lj_target__distrust(struct lj_target *t)
{
	struct derived_build *c = derived_of(&t->key);

	if (!t->cached)
		return;
	build_cache__drop(&t->key);
	if (c)
		memset(&c->key, 0, sizeof(c->key));
	t->cached = false;
}

/* A build the registry does not know: described from its own file
 * (lj_derive.h). 1 when usable, 0 with the reason in hint. */
static int derived_build(struct lj_target *t, struct elf_file *ef, const char *path,
			 const char *shown, const char *root, char *hint, size_t hintsz)
{
	struct lj_derived *d = &t->derived;
	int n = 0;

	memset(&t->local, 0, sizeof(t->local));
	memcpy(t->local.text_sha256, t->key.text_sha256, 32);
	t->local.text_size = elf_file__text_size(ef);
	if (derive_once(t, ef, path, shown, root, hint, hintsz))
		return 0;
	t->local.id = "derived";
	t->local.package = t->local_desc;
	t->local.tree = d->fork;
	t->local.kind = elf_file__sym(ef, "main", true) ? "exe" : "lib";
	t->local_syms[n++] = (struct lj_sym){ "lj_vm_asm_begin", d->sites.vm_lo };
	t->local_syms[n++] = (struct lj_sym){ "lj_vm_ffi_call", d->sites.vm_hi };
	if (d->sites.gc_cycle)
		t->local_syms[n++] = (struct lj_sym){ "lj_gc_separateudata", d->sites.gc_cycle };
	if (d->sites.abort_site)
		t->local_syms[n++] = (struct lj_sym){ "trace_abort@traceno", d->sites.abort_site };
	t->local_syms[n] = (struct lj_sym){ NULL, 0 };
	t->local.syms = t->local_syms;
	use_candidate(t, 0);
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

/* A registry build's probe sites, from its code as for any build (the
 * registry has no name for the jump inside trace_abort()), found once per
 * entry: the workers of a server share one file. */
static void registry_sites(struct lj_target *t)
{
	static struct lj_code_sites found[16];
	static const struct lj_build *of[16];
	static bool cached[16];
	int i = (int)(t->build - lj_known_builds);
	char why[256];

	if (i < 0 || i >= 16 || of[i] != t->build) {
		t->cached = build_cache__load_sites(&t->key, &t->sites) &&
			    cached_sites_hold(t->path, &t->sites, &t->layout);
		if (!t->cached) {
			memset(&t->sites, 0, sizeof(t->sites));
			if (code_sites__find(t->path, &t->layout, &t->sites, why, sizeof(why)))
				snprintf(t->sites.abort_why, sizeof(t->sites.abort_why), "%.150s", why);
			build_cache__store_sites(&t->key, &t->sites);
		}
		if (i >= 0 && i < 16) {
			found[i] = t->sites;
			of[i] = t->build;
			cached[i] = t->cached;
		}
		return;
	}
	t->sites = found[i];
	t->cached = cached[i];
}

/* Every LuaJIT exports its API; luaJIT_setmode is LuaJIT's own. */
static bool is_luajit(struct elf_file *ef)
{
	return elf_file__sym(ef, "luaJIT_setmode", true) || elf_file__sym(ef, "luaJIT_setmode", false);
}

/* Is the executable mapping [start, +) of file offset off the LuaJIT? When
 * it is LuaJIT that cannot be used, hint says why (the first such file). */
static int identify(struct lj_target *t, const char *path, const char *shown, __u64 start,
		    __u64 off, char *hint, size_t hintsz)
{
	struct elf_file *ef = elf_file__open(path);
	char why[512] = "", root[64] = "";	/* root: "" for a file seen from here */
	__u64 vaddr;
	int found = 0;

	if (!ef)
		return 0;
	if (is_luajit(ef) && !lj_derive__machine_ok(ef, shown, why, sizeof(why))) {
		snprintf(hint, hintsz, "%s", why);
		elf_file__close(ef);
		return 0;
	}
	if (is_luajit(ef)) {
		if (t->pid)
			snprintf(root, sizeof(root), "/proc/%d/root", t->pid);
		build_cache__key(ef, path, root, &t->key);
	}
	t->build = registry_match(ef, &t->key);
	if (t->build || (is_luajit(ef) && derived_build(t, ef, path, shown, root, why, sizeof(why)))) {
		vaddr = elf_file__offset_to_vaddr(ef, off);
		if (vaddr != ELF_FILE_NOADDR) {
			t->bias = start - vaddr;
			found = 1;
		}
	} else if (why[0] && !hint[0]) {
		snprintf(hint, hintsz, "%s", why);
	}
	elf_file__close(ef);
	return found;
}

/* A mapping of a file's code: where LuaJIT can be. */
static bool maps_code(const struct proc_mapping *m)
{
	return m->perms[2] == 'x' && m->file[0] == '/';
}

__u64 lj_target__code_digest(pid_t pid)
{
	__u64 h = FNV1A64_INIT;
	FILE *f = procmem__maps_open(pid);
	struct proc_mapping m;

	if (!f)
		return 0;
	while (procmem__maps_next(f, &m)) {
		if (!maps_code(&m))
			continue;
		h = fnv1a64(h, &m.start, sizeof(m.start));
		h = fnv1a64(h, &m.end, sizeof(m.end));
		h = fnv1a64(h, &m.off, sizeof(m.off));
		h = fnv1a64(h, m.file, strlen(m.file));
	}
	fclose(f);
	return h;
}

/* How far range [lo, hi) is from a. */
static __u64 distance(__u64 a, __u64 lo, __u64 hi)
{
	return a < lo ? lo - a : a >= hi ? a - hi + 1 : 0;
}

int lj_target__code_near(pid_t pid, __u64 a, __u64 *lo, __u64 *hi, int n)
{
	FILE *f = procmem__maps_open(pid);
	struct proc_mapping m;
	int k = 0;

	while (f && procmem__maps_next(f, &m)) {
		int far = 0;

		if (!maps_code(&m) || distance(a, m.start, m.end) >= 1ULL << 31)
			continue;
		if (k && hi[k - 1] == m.start) {	/* one file's, or neighbours */
			hi[k - 1] = m.end;
			continue;
		}
		if (k < n) {
			lo[k] = m.start;
			hi[k++] = m.end;
			continue;
		}
		/* Full: the new one takes the place of the farthest if nearer. */
		for (int i = 1; i < k; i++)
			if (distance(a, lo[i], hi[i]) > distance(a, lo[far], hi[far]))
				far = i;
		if (distance(a, m.start, m.end) < distance(a, lo[far], hi[far])) {
			lo[far] = m.start;
			hi[far] = m.end;
		}
	}
	if (f)
		fclose(f);
	return k;
}

int lj_target__open(struct lj_target *t, pid_t pid, char *err, size_t errsz)
{
	int ret = lj_target__identify(t, pid, err, errsz), found;

	if (ret)
		return ret;
	found = lj_target__scan_vms(t);
	if (!found && t->layout_why[0] && t->cached) {
		lj_target__distrust(t);		/* describe the build afresh */
		if ((ret = lj_target__identify(t, pid, err, errsz)))
			return ret;
		found = lj_target__scan_vms(t);
	}
	if (!found && t->layout_why[0]) {
		snprintf(err, errsz, "unsupported build: %s: %s: its VM does not match the layout "
			 "nupp-bpf has for it (%s)", t->shown, lj_target__build(t)->package, t->layout_why);
		return LJ_TARGET_UNSUPPORTED;
	}
	if (!t->ngs && !t->build && t->derived.ncands > 1) {
		snprintf(err, errsz, "unsupported build: %s: %s matches %d layouts of nupp-bpf's "
			 "revision table, and it has no VM yet to tell them apart; attach with -p once "
			 "it runs, or use a build with DWARF", t->shown, t->derived.version.text,
			 t->derived.ncands);
		return LJ_TARGET_UNSUPPORTED;
	}
	return 0;
}

/* What a build found by identify() needs before use: its layout, the
 * interpreter's runtime range, its probe sites. */
static void finish_identify(struct lj_target *t)
{
	t->layout = lj_target__build(t)->layout;
	t->vm_lo = lj_target__sym(t, "lj_vm_asm_begin") + t->bias;
	t->vm_hi = lj_target__sym(t, "lj_vm_ffi_call") + t->bias;
	if (t->build)
		registry_sites(t);
	else
		t->sites = t->derived.sites;
}

int lj_target__open_file(struct lj_target *t, const char *path, char *err, size_t errsz)
{
	char hint[512] = "";

	memset(t, 0, sizeof(*t));
	snprintf(t->path, sizeof(t->path), "%s", path);
	snprintf(t->shown, sizeof(t->shown), "%s", path);
	if (access(path, R_OK)) {
		snprintf(err, errsz, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	if (!identify(t, path, path, 0, 0, hint, sizeof(hint))) {
		if (hint[0]) {
			snprintf(err, errsz, "unsupported build: %s", hint);
			return LJ_TARGET_UNSUPPORTED;
		}
		snprintf(err, errsz, "%s does not contain LuaJIT", path);
		return -1;
	}
	t->bias = 0;
	finish_identify(t);
	return 0;
}

int lj_target__identify(struct lj_target *t, pid_t pid, char *err, size_t errsz)
{
	char hint[512] = "";
	struct proc_mapping m;
	FILE *f;
	int found = 0;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	if (kill(pid, 0) && errno == ESRCH) {
		snprintf(err, errsz, "no process with PID %d", pid);
		return -1;
	}
	f = procmem__maps_open(pid);
	if (!f) {
		snprintf(err, errsz, "cannot read /proc/%d/maps: %s", pid, strerror(errno));
		return -1;
	}
	while (!found && procmem__maps_next(f, &m)) {
		if (!maps_code(&m))
			continue;
		/* map_files reaches the mapped file even across mount namespaces
		 * or when it was deleted or replaced on disk. */
		snprintf(t->path, sizeof(t->path), "/proc/%d/map_files/%lx-%lx", pid, m.start, m.end);
		found = identify(t, t->path, m.file, m.start, m.off, hint, sizeof(hint));
		if (found) {
			snprintf(t->shown, sizeof(t->shown), "%s", m.file);
			stable_path(t);
		}
	}
	fclose(f);
	if (!found) {
		if (hint[0]) {
			snprintf(err, errsz, "unsupported build: %s", hint);
			return LJ_TARGET_UNSUPPORTED;
		}
		snprintf(err, errsz, "process %d does not contain LuaJIT", pid);
		return -1;
	}
	finish_identify(t);
	return 0;
}

#define SCAN_CHUNK	(256 << 10)	/* bytes of the target read at once */

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
	if ((v & LJ_GCVMASK) != p || buf[lj->gc_gct] != LJ_GCT_THREAD)
		return 0;
	return buf[lj->gg_g + lj->g_strempty + lj->gc_gct] == LJ_GCT_STR;	/* g->strempty */
}

static bool in_vm(const struct lj_target *t, __u64 a)
{
	return a >= t->vm_lo && a < t->vm_hi;
}

/* A GC object of type gct at a (or NULL, when null_ok)? */
static bool gcobj_is(const struct lj_target *t, const struct lj_layout *lj, __u64 a,
		     __u8 gct, bool null_ok)
{
	__u8 v;

	if (!a)
		return null_ok;
	return !procmem__read(t->pid, &v, 1, (a & LJ_GCVMASK) + lj->gc_gct) && v == gct;
}

static __u64 u64_at(const __u8 *buf, __u32 off)
{
	__u64 v;

	memcpy(&v, buf + off, 8);
	return v;
}

/*
 * Beyond the signature: every field the programs read holds what it must in
 * the GG_State at p, under layout lj. The dispatch table proves the size of
 * global_State and jit_State (it lies after both, and points into the
 * interpreter); the rest each prove a field's offset. why gets the first
 * field that fails.
 */
static bool gg_verified(const struct lj_target *t, const struct lj_layout *lj, __u64 p,
			const __u8 *buf, size_t n, char *why, size_t whysz)
{
	__u64 g = p + lj->gg_g, J = p + lj->gg_j, disp[8], L[4];
	__s32 vmstate;
	__u32 state, sizetrace;
	const char *bad = NULL;

	if (n < lj->gg_g + lj->g_cur_L + 8 || n < lj->gg_g + lj->g_mainthref + 8)
		return false;
	if (procmem__read(t->pid, disp, sizeof(disp), g - lj->disp2g))
		bad = "the dispatch table is unreadable";
	for (int i = 0; !bad && i < 8; i++)
		if (!in_vm(t, disp[i]))
			bad = "the dispatch table does not point into the interpreter (GG_DISP2G)";
	if (!bad && (procmem__read(t->pid, &vmstate, 4, g + lj->g_vmstate) ||
		     vmstate < LJ_VMST_ASM || vmstate > 65535))
		bad = "g->vmstate holds no VM state";
	if (!bad && !gcobj_is(t, lj, u64_at(buf, lj->gg_g + lj->g_cur_L), LJ_GCT_THREAD, true))
		bad = "g->cur_L is not a thread";
	/* A build without the JIT (LUAJIT_DISABLE_JIT) has no jit_State: its
	 * layout's gg_j is 0, and J would be the main thread. */
	if (!bad && lj->gg_j &&
	    (procmem__read(t->pid, &state, 4, J + lj->J_state) || state > 0x16 ||
	     procmem__read(t->pid, &sizetrace, 4, J + lj->J_sizetrace) || sizetrace > 65536))
		bad = "J->state or J->sizetrace out of range";
	if (!bad && lj->gg_j && (procmem__read(t->pid, &L[0], 8, J + lj->J_L) ||
				 !gcobj_is(t, lj, L[0], LJ_GCT_THREAD, true)))
		bad = "J->L is not a thread";
	L[0] = u64_at(buf, lj->L_stack), L[1] = u64_at(buf, lj->L_base);
	L[2] = u64_at(buf, lj->L_top), L[3] = u64_at(buf, lj->L_maxstack);
	if (!bad && !(L[0] && L[0] <= L[1] && L[1] <= L[2] && L[2] <= L[3] + 8 * 8))
		bad = "the main thread's stack, base, top and maxstack are out of order";
	if (bad)
		snprintf(why, whysz, "%s", bad);
	return !bad;
}

/* The layouts to try: a registry build has its own, a derived build its
 * candidates, most likely first. */
static int layouts_of(const struct lj_target *t, const struct lj_layout **out)
{
	if (t->build) {
		out[0] = &t->build->layout;
		return 1;
	}
	for (int i = 0; i < t->derived.ncands; i++)
		out[i] = t->derived.cands[i].layout;
	return t->derived.ncands;
}

int lj_target__adopt_vm(struct lj_target *t, __u64 g)
{
	const struct lj_layout *lj[LJ_DERIVE_MAX_CANDS];
	int n = layouts_of(t, lj);
	__u8 buf[8192];

	for (int i = 0; i < n; i++) {
		__u64 p = g - lj[i]->gg_g;

		if (procmem__read(t->pid, buf, sizeof(buf), p) ||
		    !gg_at(lj[i], p, buf, sizeof(buf)) ||
		    !gg_verified(t, lj[i], p, buf, sizeof(buf), t->layout_why, sizeof(t->layout_why)))
			continue;
		if (!t->build)
			use_candidate(t, i);
		t->gs[0] = g;
		t->ngs = 1;
		return 0;
	}
	return -1;
}

/* The first 16-byte step from i on, below SCAN_CHUNK, where a GG_State at
 * a + i would have its L->glref: a word that points to its own global_State.
 * The scan's time goes to this test (65,536 a MiB): one compare each; n
 * when there is none. */
static size_t next_glref(const struct lj_layout *lj, __u64 a, const __u8 *buf, size_t i,
			 size_t n)
{
	size_t end = n < SCAN_CHUNK ? n : SCAN_CHUNK;
	__u64 want = a + lj->gg_g, v;

	if (n < lj->L_glref + 8)
		return n;
	if (end > n - lj->L_glref - 8 + 1)
		end = n - lj->L_glref - 8 + 1;
	for (; i < end; i += 16) {
		memcpy(&v, buf + i + lj->L_glref, 8);
		if (v - i == want)
			return i;
	}
	return n;
}

/* Scan the process's anonymous writable memory for GG_States, under every
 * candidate layout; the first candidate that finds verified ones is kept. */
int lj_target__scan_vms(struct lj_target *t)
{
	enum { CHUNK = SCAN_CHUNK, OVERLAP = 8192 };
	const __u64 budget = 4ULL << 30;	/* bytes; a huge heap is not worth more */
	const struct lj_layout *lj[LJ_DERIVE_MAX_CANDS];
	__u64 found[LJ_DERIVE_MAX_CANDS][LJ_TARGET_MAX_VMS];
	int nfound[LJ_DERIVE_MAX_CANDS] = { 0 }, ncand = layouts_of(t, lj);
	struct proc_mapping m;
	__u64 scanned = 0;
	__u8 *buf;
	FILE *f;

	f = procmem__maps_open(t->pid);
	buf = malloc(CHUNK + OVERLAP);
	if (!f || !buf)
		goto out;
	t->ngs = 0;
	t->layout_why[0] = '\0';
	while (scanned < budget && procmem__maps_next(f, &m)) {
		if (m.perms[0] != 'r' || m.perms[1] != 'w' || (m.file[0] && strcmp(m.file, "[heap]")))
			continue;
		for (__u64 a = m.start; a < m.end; a += CHUNK) {
			size_t n = m.end - a < CHUNK + OVERLAP ? m.end - a : CHUNK + OVERLAP;

			if (procmem__read(t->pid, buf, n, a))
				break;
			scanned += n;
			for (int c = 0; c < ncand; c++)
				for (size_t i = 0; (i = next_glref(lj[c], a, buf, i, n)) < n; i += 16)
					if (gg_at(lj[c], a + i, buf + i, n - i) &&
					    gg_verified(t, lj[c], a + i, buf + i, n - i, t->layout_why,
							sizeof(t->layout_why)) &&
					    nfound[c] < LJ_TARGET_MAX_VMS)
						found[c][nfound[c]++] = a + i + lj[c]->gg_g;
		}
	}
	for (int c = 0; c < ncand; c++) {
		if (!nfound[c])
			continue;
		if (!t->build)
			use_candidate(t, c);
		memcpy(t->gs, found[c], nfound[c] * sizeof(found[c][0]));
		t->ngs = nfound[c];
		t->layout_why[0] = '\0';
		break;
	}
out:
	if (f)
		fclose(f);
	free(buf);
	return t->ngs;
}
