// SPDX-License-Identifier: MIT
/*
 * lj_derive.c - describe a LuaJIT build from its own file.
 *
 * Order of evidence: the version string and exports name the revision (a
 * rolling build prints its commit time; OpenResty's fork exports
 * lua_setexdata); the revision table gives that revision's layouts; DWARF
 * in the file or in its debug file gives the layout of this very build and
 * goes first; symbols, else the machine code, give the code sites. What
 * cannot be used is refused here, with the reason and what would help.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dwarf_layout.h"
#include "lj_derive.h"

/* Any of these in .dynsym: OpenResty's luajit2 (its thread.exdata API). */
static const char *const openresty_exports[] = { "lua_setexdata", "lua_getexdata", NULL };

static const void *find_bytes(const void *hay, size_t n, const char *needle)
{
	return memmem(hay, n, needle, strlen(needle));
}

bool lj_derive__version_in(const char *data, size_t n, struct lj_version *v)
{
	const char prefix[] = "LuaJIT 2.";
	const char *p = data ? find_bytes(data, n, prefix) : NULL;

	while (p) {
		size_t left = n - (size_t)(p - data), len = strnlen(p, left);
		const char *rest = p + sizeof(prefix) - 1;

		/* A C string, NUL and all, that holds the minor version and
		 * its dot: the section may end anywhere. */
		if (len < left && len < sizeof(v->text) && len >= sizeof(prefix) + 1 &&
		    (rest[0] == '0' || rest[0] == '1') && rest[1] == '.') {
			snprintf(v->text, sizeof(v->text), "%.*s", (int)len, p);
			v->minor = rest[0] - '0';
			if (v->minor == 1 && strncmp(rest + 2, "0-", 2))
				v->rolling = strtoull(rest + 2, NULL, 10);
			return true;
		}
		p = find_bytes(p + 1, left - 1, prefix);
	}
	return false;
}

/* Search the read-only data, where luajit.h's LUAJIT_VERSION lands. */
void lj_derive__version(struct elf_file *ef, struct lj_version *v)
{
	static const char *const sections[] = { ".rodata", ".rodata.str1.1", ".rodata.str1.8", NULL };

	memset(v, 0, sizeof(*v));
	v->minor = -1;
	for (int i = 0; sections[i]; i++) {
		size_t n = 0;
		const char *data = elf_file__section(ef, sections[i], &n);

		if (lj_derive__version_in(data, n, v))
			return;
	}
}

bool lj_derive__machine_ok(struct elf_file *ef, const char *shown, char *err, size_t errsz)
{
	bool elf64 = false;
	int machine = elf_file__machine(ef, &elf64);

	if (machine == EM_X86_64 && elf64)
		return true;
	snprintf(err, errsz, "%s: a %s ELF file for machine %d; nupp-bpf profiles x86-64 LuaJIT only",
		 shown, elf64 ? "64-bit" : "32-bit", machine);
	return false;
}

static bool any_export(struct elf_file *ef, const char *const *names)
{
	for (; *names; names++)
		if (elf_file__sym(ef, *names, true))
			return true;
	return false;
}

/* jit.util's functions exist only in a build with the JIT compiler. */
static bool has_jit(struct elf_file *ef)
{
	size_t n = 0;
	const void *data = elf_file__section(ef, ".rodata", &n);

	return data && find_bytes(data, n, "traceexitstub");
}

static void add_candidate(struct lj_derived *d, const struct lj_layout *lj,
			  const struct lj_revision *rev, const char *from)
{
	for (int i = 0; i < d->ncands; i++)
		if (!memcmp(d->cands[i].layout, lj, sizeof(*lj)))
			return;
	if (d->ncands < LJ_DERIVE_MAX_CANDS)
		d->cands[d->ncands++] = (struct lj_candidate){ lj, rev, from };
}

/*
 * Build options that move fields, as the build shows them: a module or an
 * entry point exists only when its part was compiled in. Written as the
 * revision table names option sets (sorted, space-separated).
 */
static void build_options(struct elf_file *ef, const struct lj_derived *d, char *out, size_t outsz)
{
	bool ffi = elf_file__sym(ef, "luaopen_ffi", true) || elf_file__sym(ef, "luaopen_ffi", false);
	bool profile = elf_file__sym(ef, "luaJIT_profile_start", true) ||
		       elf_file__sym(ef, "luaJIT_profile_start", false);

	snprintf(out, outsz, "%s%s%s", ffi ? "" : "LUAJIT_DISABLE_FFI ",
		 d->has_jit ? "" : "LUAJIT_DISABLE_JIT ", profile ? "" : "LUAJIT_DISABLE_PROFILE ");
	if (out[0])
		out[strlen(out) - 1] = '\0';
}

/* The layout of revision r built with options (NULL when the table has no
 * such build of it). */
static const struct lj_layout *layout_of(const struct lj_revision *r, const char *options)
{
	if (!options[0])
		return r->layout;
	for (int i = 0; i < r->nvariants; i++)
		if (!strcmp(r->variants[i].options, options))
			return r->variants[i].layout;
	return NULL;
}

/*
 * The revisions the build can be. A rolling build prints its commit time:
 * that revision, or when the table has no row for it, the rows around it
 * (its code and its live VM decide). A 2.1.0-beta3 build is any revision of its fork
 * that printed so: every distinct layout among them, newest first.
 */
static void pick_revisions(struct lj_derived *d, const char *options)
{
	const struct lj_revision *best = NULL, *next = NULL;

	for (int i = lj_nrevisions - 1; i >= 0; i--) {
		const struct lj_revision *r = &lj_revisions[i];
		const struct lj_layout *lj = layout_of(r, options);

		if (strcmp(r->fork, d->fork) || !lj)
			continue;
		if (d->version.rolling) {
			if (r->time <= d->version.rolling && (!best || r->time > best->time))
				best = r;
			if (r->time > d->version.rolling && (!next || r->time < next->time))
				next = r;
		} else if (!strcmp(r->version, d->version.text) ||
			   !strncmp(r->version, "LuaJIT 2.1.0-beta", 17)) {
			add_candidate(d, lj, r, "revision table");
		}
	}
	if (best)
		add_candidate(d, layout_of(best, options), best, "revision table");
	/* Between two rows of the table (a revision it lacks): the one after
	 * may already have the change the build has. */
	if (next && (!best || best->time != d->version.rolling))
		add_candidate(d, layout_of(next, options), next, "revision table");
}

/* A separate debug file: /usr/lib/debug/.build-id/xx/rest.debug under the
 * target's root (the -dbgsym package's place). */
bool lj_derive__debug_file(struct elf_file *ef, const char *root, char *out, size_t outsz)
{
	size_t n = 0;
	const unsigned char *note = elf_file__section(ef, ".note.gnu.build-id", &n);
	char hex[2 * 64 + 1];
	size_t len;

	if (!note || n < 16)
		return false;
	len = *(const __u32 *)(note + 4);	/* Elf64_Nhdr n_descsz; name "GNU\0" */
	if (len == 0 || len > 64 || 16 + len > n)
		return false;
	for (size_t i = 0; i < len; i++)
		sprintf(hex + 2 * i, "%02x", note[16 + i]);
	snprintf(out, outsz, "%s/usr/lib/debug/.build-id/%.2s/%s.debug", root, hex, hex + 2);
	return access(out, R_OK) == 0;
}

static void read_dwarf(struct elf_file *ef, const char *path, const char *root, struct lj_derived *d)
{
	char dbg[4096], why[256];
	const char *from = path;

	if (!dwarf_layout__present(path)) {
		if (!lj_derive__debug_file(ef, root, dbg, sizeof(dbg)))
			return;
		from = dbg;
	}
	d->has_dwarf = dwarf_layout__read(from, &d->dwarf, why, sizeof(why)) == 0;
}

/* The build's own DWARF is its layout; the table gives the names, of the
 * revision with that very layout when there is one. */
static void use_dwarf(struct lj_derived *d)
{
	const struct lj_revision *rev = d->ncands ? d->cands[0].rev : NULL;

	for (int i = 0; i < d->ncands && !d->dwarf_in_table; i++)
		if (!memcmp(d->cands[i].layout, &d->dwarf, sizeof(d->dwarf))) {
			rev = d->cands[i].rev;
			d->dwarf_in_table = true;
		}
	d->cands[0] = (struct lj_candidate){ &d->dwarf, rev, "DWARF" };
	d->ncands = 1;
}

static bool has_disp(const __s64 *v, int n, __s64 x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* lua_close() reads g->mainthref and clears g->cur_L through g: a layout
 * whose offsets its code uses for both is preferred, when any is. */
static void prefer_close_evidence(struct lj_derived *d, const char *path)
{
	__s64 disps[256];
	int nd = code_sites__offsets_used(path, "lua_close", disps, 256), n = 0;

	if (nd <= 0 || nd > 256)
		return;
	for (int i = 0; i < d->ncands; i++) {
		const struct lj_layout *lj = d->cands[i].layout;

		if (has_disp(disps, nd, lj->g_mainthref) && has_disp(disps, nd, lj->g_cur_L))
			d->cands[n++] = d->cands[i];
	}
	if (n)
		d->ncands = n;
}

/* Without DWARF: only the table layouts the build's code agrees with (the
 * offsets its API functions and its interpreter use, code_sites.h). why
 * gets the last reason one was dropped. */
static void keep_fitting(struct lj_derived *d, const char *path, char *why, size_t whysz)
{
	int n = 0;

	for (int i = 0; i < d->ncands; i++)
		if (code_sites__layout_check(path, d->cands[i].layout, why, whysz))
			d->cands[n++] = d->cands[i];
	d->ncands = n;
	if (n > 1)
		prefer_close_evidence(d, path);
	if (n)
		why[0] = '\0';
}

/* Code sites from .symtab when the build has one, else from its code. */
static int find_sites(struct elf_file *ef, const char *path, const char *shown,
		      struct lj_derived *d, char *err, size_t errsz)
{
	const struct lj_layout *lj = d->cands[0].layout;
	struct lj_code_sites *s = &d->sites;
	char why[256];

	if (code_sites__find(path, lj, s, why, sizeof(why))) {
		snprintf(err, errsz, "%s: %s: cannot find LuaJIT's interpreter in its code (%s)",
			 shown, d->version.text, why);
		return -1;
	}
	d->sites_from = "machine code";
	if (elf_file__sym(ef, "lj_vm_asm_begin", false)) {
		__u64 lo = elf_file__sym(ef, "lj_vm_asm_begin", false);
		__u64 hi = elf_file__sym(ef, "lj_vm_ffi_call", false);
		__u64 gc = elf_file__sym(ef, "lj_gc_separateudata", false);

		/* Symbols and code must agree: a disagreement is a bug to report,
		 * never a reason to guess. A GC function the code does not find
		 * is not called once per cycle (inlined into the cycle, called
		 * at close only): no probe there. */
		if ((lo && lo != s->vm_lo) || (hi && hi != s->vm_hi) || (gc && s->gc_cycle && gc != s->gc_cycle)) {
			snprintf(err, errsz, "%s: %s: the code sites found in its machine code "
				 "disagree with its symbols; please report this build", shown, d->version.text);
			return -1;
		}
		d->sites_from = "symbols";
	}
	if (!d->has_jit) {
		s->abort_site = 0;
		snprintf(s->abort_why, sizeof(s->abort_why), "built without the JIT compiler (LUAJIT_DISABLE_JIT)");
	}
	return 0;
}

int lj_derive(struct elf_file *ef, const char *path, const char *shown, const char *root,
	      struct lj_derived *d, char *err, size_t errsz)
{
	char why[256] = "";

	memset(d, 0, sizeof(*d));
	if (!lj_derive__machine_ok(ef, shown, err, errsz))
		return -1;
	lj_derive__version(ef, &d->version);
	if (d->version.minor == 0) {
		snprintf(err, errsz, "%s: %s; nupp-bpf profiles LuaJIT 2.1 (GC64) only", shown, d->version.text);
		return -1;
	}
	if (d->version.minor < 0)
		snprintf(d->version.text, sizeof(d->version.text), "LuaJIT (no version string)");
	d->fork = any_export(ef, openresty_exports) ? "luajit2" : "luajit";
	d->has_jit = has_jit(ef);
	if (code_sites__gc64(path, why, sizeof(why)) == 0) {
		snprintf(err, errsz, "%s: %s is a non-GC64 build (32-bit GC references: "
			 "LUAJIT_DISABLE_GC64, or a 2.1 from before 2020); nupp-bpf profiles GC64 builds only",
			 shown, d->version.text);
		return -1;
	}
	why[0] = '\0';
	build_options(ef, d, d->options, sizeof(d->options));
	pick_revisions(d, d->options);
	read_dwarf(ef, path, root, d);
	if (d->has_dwarf)
		use_dwarf(d);
	else
		keep_fitting(d, path, why, sizeof(why));
	if (!d->ncands) {
		snprintf(err, errsz, "%s: %s (%s%s%s) has no layout in nupp-bpf's revision table%s%s; "
			 "a build with DWARF (-g, or its debug package) would describe itself",
			 shown, d->version.text, d->fork, d->options[0] ? ", " : "", d->options,
			 why[0] ? " that its code agrees with: " : "", why);
		return -1;
	}
	return find_sites(ef, path, shown, d, err, errsz);
}
