// SPDX-License-Identifier: MIT
/*
 * test_code_sites.c - the code-site finder (user/luajit/code_sites.c) against
 * builds whose symbols and DWARF we have.
 *
 * For each LuaJIT build with symbols, a stripped copy is searched, and what
 * the finder says is compared with the original's .symtab and DWARF:
 *   - interpreter blob == [lj_vm_asm_begin, lj_vm_ffi_call);
 *   - GC cycle probe == lj_gc_separateudata, or none when only lua_close
 *     calls it (the GC's atomic phase has it inlined: upstream clang -O3);
 *   - trace-abort sites == the je/jne at or right after each line-table
 *     address of trace_abort's "if (traceno)" (lj_trace.c), one per copy of
 *     the test the compiler made; and == the registry's trace_abort@traceno
 *     when the registry knows the build and has that site;
 *   - the search along the interpreter's calls and the search of every
 *     function agree (so the site is unique in the whole file);
 *   - code_sites__verify accepts the sites and refuses the middle of an
 *     instruction, a function entry check on a non-entry, a jcc check on
 *     something else, and the site in copies of the file where the jccs, or
 *     the load of traceno, are overwritten with NOPs of the same length;
 *   - code_sites__gc64 == whether DWARF's GCRef holds gcptr64 (1) or
 *     gcptr32 (0);
 *   - code_sites__offsets_used(luaJIT_setmode) is the same for the stripped
 *     copy and the original and, with JIT, holds J->state and J->flags from
 *     g (gg_j - gg_g + J_state, + J_flags);
 *   - code_sites__layout_fits: the build's own layout (the registry's for
 *     its tree, with gg_g, gg_j, disp2g, g_vmstate, J_state and J_flags
 *     from DWARF) fits a GC64 build; the registry layouts debian-luajit-bin
 *     and debian-luajit2-bin fit exactly when they agree with DWARF on what
 *     is checked, so the other tree's never does; a layout off in J's
 *     place, in J_flags or in disp2g alone is refused for its own reason.
 * J->cur's offsets come from the build's own DWARF (GCtrace, jit_State).
 * The three build facts are timed on the pinned luajit (.text ~430 KiB).
 *
 * Builds: the pinned rebuilds build/luajit/{luajit,luajit2}/src/{luajit,
 * libluajit.so} (always present after `make`), the stock Debian files in
 * build/stock/ (stripped; expected values from the pinned rebuild, whose
 * .text is the same), and whichever variants scripts/build-variants.sh has
 * built in build/variants/ (both files of each):
 *   luajit-gcc-O1, -O3, -Os        Debian luajit tree, make amalg, gcc 12
 *   luajit-gcc-fp                  -O2 -fno-omit-frame-pointer
 *   luajit-gcc-nummode2            -DLUAJIT_NUMMODE=2 -DLUAJIT_ENABLE_LUA52COMPAT
 *   luajit-gcc-nojit               -DLUAJIT_DISABLE_JIT: no abort site, "no JIT"
 *   luajit-gcc-nogc64              -DLUAJIT_DISABLE_GC64: 32-bit GC refs, no layout fits
 *   luajit-clang-O2                clang 14
 *   luajit2-clang-O2, -Os          Debian luajit2 (OpenResty) tree, clang 14
 *   luajit2-gcc-noffi              -DLUAJIT_DISABLE_FFI
 *   luajit2-gcc-nopie              a non-PIE executable (-Wl,-E -no-pie)
 *   luajit2-gcc-nogc64             -DLUAJIT_DISABLE_GC64
 *   openresty-gcc-O2               OpenResty's v2.1-agentzh head, make amalg
 *   upstream-make                  upstream v2.1 head, plain make (not amalg)
 *   upstream-clang-O3              the same with clang -O3
 * A Debian 13 root's stripped luajit (build/roots/trixie), when present, is
 * searched and what is found printed: nothing there to compare with.
 *
 * No root needed; runs `strip`. Prints "N passed, M failed"; exits non-zero
 * on a failure.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <capstone/capstone.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include "luajit/code_sites.h"
#include "luajit/elf_file.h"
#include "luajit/lj_build.h"

#define MAX_SITES	8
#define SLOW_MS		500.0	/* a sanity bound; the goal is < 50 ms */
#define FACTS_SLOW_MS	50.0	/* gc64, offsets_used, layout_fits: a few ms each */

static struct {
	int passed, failed, bad;
	char tmp[64];
	csh cs;
} T;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	T.bad++;
	printf("    FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool exists(const char *path)
{
	return access(path, R_OK) == 0;
}

/* ---------------------------------------------------------------------------
 * What the unstripped build says: symbols, DWARF members, line table
 */

struct truth {
	__u64 vm_lo, vm_hi, gc;
	bool gc_per_cycle;		/* a function besides lua_close calls gc */
	bool jit;
	__u64 sites[MAX_SITES];		/* the jccs of "if (traceno)" */
	int nsites;
	__u64 load;			/* the load of traceno before sites[0], 0 unknown */
	struct lj_layout lj;		/* J_cur_traceno, J_cur_link, J_cur_linktype, and
					 * what layout_fits checks: gg_g, gg_j, disp2g,
					 * g_vmstate, J_state, J_flags (gg_j and J_* 0
					 * without JIT, as user/luajit/dwarf_layout.c has it) */
	int gc64;			/* GCRef holds gcptr64: 1, gcptr32: 0, -1 unknown */
};

static Dwarf_Word member_offset(Dwarf_Die *st, const char *name)
{
	Dwarf_Die m;
	Dwarf_Attribute a;
	Dwarf_Word off;

	if (dwarf_child(st, &m))
		return (Dwarf_Word)-1;
	do {
		const char *n = dwarf_diename(&m);

		if (dwarf_tag(&m) == DW_TAG_member && n && !strcmp(n, name) &&
		    dwarf_attr(&m, DW_AT_data_member_location, &a) && !dwarf_formudata(&a, &off))
			return off;
	} while (!dwarf_siblingof(&m, &m));
	return (Dwarf_Word)-1;
}

/* The structs read from DWARF, by tag. */
enum { S_GCTRACE, S_JIT, S_GG, S_G, S_GCREF, S__MAX };
static const char *const struct_names[S__MAX] = {
	"GCtrace", "jit_State", "GG_State", "global_State", "GCRef",
};

/* Find the definitions of struct_names[] under die; *left counts down. */
static void find_structs(Dwarf_Die *die, Dwarf_Die *defs, bool *have, int *left)
{
	Dwarf_Die c;

	if (dwarf_child(die, &c))
		return;
	do {
		const char *n = dwarf_diename(&c);

		if (dwarf_tag(&c) != DW_TAG_structure_type || !n || dwarf_hasattr(&c, DW_AT_declaration))
			continue;
		for (int i = 0; i < S__MAX; i++)
			if (!have[i] && !strcmp(n, struct_names[i])) {
				defs[i] = c, have[i] = true;
				--*left;
			}
	} while (*left && !dwarf_siblingof(&c, &c));
}

/* The line of "if (traceno)" right after "traceno = J->cur.traceno;". */
static int traceno_line(const char *src)
{
	FILE *f = fopen(src, "r");
	char line[512];
	int n = 0, after = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (after == n - 1 && after && strstr(line, "if (traceno)")) {
			fclose(f);
			return n;
		}
		if (strstr(line, "traceno = J->cur.traceno;") && !strstr(line, "TraceNo"))
			after = n;
	}
	fclose(f);
	return 0;
}

static void add_site(__u64 *v, int *n, __u64 a)
{
	for (int i = 0; i < *n; i++)
		if (v[i] == a)
			return;
	if (*n < MAX_SITES)
		v[(*n)++] = a;
}

/* The first je/jne at or after addr, within 4 instructions, or 0. */
static __u64 next_jcc(struct elf_file *ef, __u64 addr)
{
	__u64 lo, hi;
	const __u8 *p = elf_file__code_at(ef, addr, &lo, &hi);
	cs_insn *in;
	__u64 found = 0;
	size_t n;

	if (!p)
		return 0;
	n = cs_disasm(T.cs, p + (addr - lo), hi - addr < 64 ? hi - addr : 64, addr, 4, &in);
	for (size_t i = 0; i < n && !found; i++) {
		if (in[i].id == X86_INS_JE || in[i].id == X86_INS_JNE)
			found = in[i].address;
		else if (in[i].id == X86_INS_CALL || in[i].id == X86_INS_JMP || in[i].id == X86_INS_RET)
			break;
	}
	if (n)
		cs_free(in, n);
	return found;
}

/* Does the instruction at addr read [reg + off] (the load of traceno)? */
static bool reads_traceno(struct elf_file *ef, __u64 addr, __u32 off)
{
	__u64 lo, hi;
	const __u8 *p = elf_file__code_at(ef, addr, &lo, &hi);
	cs_insn *in;
	bool yes = false;

	cs_option(T.cs, CS_OPT_DETAIL, CS_OPT_ON);
	if (p && cs_disasm(T.cs, p + (addr - lo), 16, addr, 1, &in) == 1) {
		const cs_x86 *x = &in->detail->x86;

		for (int k = 0; k < x->op_count; k++)
			yes |= x->operands[k].type == X86_OP_MEM && x->operands[k].mem.disp == off &&
			       x->operands[k].mem.index == X86_REG_INVALID;
		cs_free(in, 1);
	}
	cs_option(T.cs, CS_OPT_DETAIL, CS_OPT_OFF);
	return yes;
}

/* The line table's addresses of "if (traceno)" and of the load before it. */
static void dwarf_sites(Dwarf *dw, struct elf_file *ef, const char *bindir, struct truth *t)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	char src[4096] = "";
	int want = 0;
	__u64 loads[4 * MAX_SITES];
	int nloads = 0;

	while (!dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;
		Dwarf_Lines *lines;
		size_t nl;

		if (dwarf_offdie(dw, off + hsize, &cu) && !dwarf_getsrclines(&cu, &lines, &nl))
			for (size_t i = 0; i < nl; i++) {
				Dwarf_Line *l = dwarf_onesrcline(lines, i);
				const char *name = dwarf_linesrc(l, NULL, NULL);
				const char *base = name ? strrchr(name, '/') : NULL;
				Dwarf_Addr a;
				int ln;

				if (!name || strcmp(base ? base + 1 : name, "lj_trace.c") ||
				    dwarf_lineno(l, &ln) || dwarf_lineaddr(l, &a))
					continue;
				if (strcmp(src, name)) {
					char alt[4200];

					/* clang's DWARF 5 may name it relative to the build. */
					snprintf(src, sizeof(src), "%s", name);
					snprintf(alt, sizeof(alt), "%s/lj_trace.c", bindir);
					want = traceno_line(src);
					if (!want)
						want = traceno_line(alt);
				}
				if (want && ln == want) {
					__u64 j = next_jcc(ef, a);

					if (j)
						add_site(t->sites, &t->nsites, j);
				} else if (want && ln == want - 1 && nloads < 4 * MAX_SITES) {
					loads[nloads++] = a;
				}
			}
		off = next;
	}
	/* The sites in address order; the load is the first row of the line
	 * before (traceno = J->cur.traceno) shortly before the first site. */
	for (int i = 0; i < t->nsites; i++)
		for (int k = i + 1; k < t->nsites; k++)
			if (t->sites[k] < t->sites[i]) {
				__u64 x = t->sites[i];

				t->sites[i] = t->sites[k], t->sites[k] = x;
			}
	for (int i = 0; i < nloads; i++)
		if (t->nsites && loads[i] < t->sites[0] && loads[i] + 24 > t->sites[0] &&
		    (!t->load || loads[i] < t->load))
			t->load = loads[i];
	if (t->load && !reads_traceno(ef, t->load, t->lj.J_cur_traceno))
		t->load = 0;
}

/* Does a function of .symtab other than lua_close call target directly?
 * (The GC's atomic phase calls lj_gc_separateudata, unless inlined.) */
static bool called_besides_close(const char *path, __u64 target)
{
	int fd = open(path, O_RDONLY);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	struct elf_file *ef = elf_file__open(path);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	bool found = false;

	while (elf && ef && !found && (scn = elf_nextscn(elf, scn))) {
		Elf_Data *d = elf_getdata(scn, NULL);

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !d)
			continue;
		for (size_t i = 0; !found && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;
			const __u8 *p;
			__u64 lo, hi;
			cs_insn *in;
			size_t n;

			if (!gelf_getsym(d, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_size ||
			    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)) || !strcmp(name, "lua_close") ||
			    !(p = elf_file__code_at(ef, sym.st_value, &lo, &hi)) || sym.st_value + sym.st_size > hi)
				continue;
			n = cs_disasm(T.cs, p + (sym.st_value - lo), sym.st_size, sym.st_value, 0, &in);
			for (size_t k = 0; k < n; k++)
				found |= in[k].id == X86_INS_CALL && strtoull(in[k].op_str, NULL, 0) == target;
			if (n)
				cs_free(in, n);
		}
	}
	elf_file__close(ef);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return found;
}

static int read_truth(const char *path, struct truth *t)
{
	struct elf_file *ef = elf_file__open(path);
	int fd = open(path, O_RDONLY);
	Dwarf *dw = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
	Dwarf_Off off = 0, next;
	size_t hsize;
	Dwarf_Die defs[S__MAX];
	bool have[S__MAX] = { false };
	int left = S__MAX, ret = -1;

	memset(t, 0, sizeof(*t));
	if (!ef || !dw)
		goto out;
	t->vm_lo = elf_file__sym(ef, "lj_vm_asm_begin", false);
	t->vm_hi = elf_file__sym(ef, "lj_vm_ffi_call", false);
	t->gc = elf_file__sym(ef, "lj_gc_separateudata", false);
	t->jit = elf_file__sym(ef, "lj_trace_hot", false) != 0;
	t->gc_per_cycle = t->gc && called_besides_close(path, t->gc);
	while (left && !dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;

		if (dwarf_offdie(dw, off + hsize, &cu))
			find_structs(&cu, defs, have, &left);
		off = next;
	}
	t->gc64 = !have[S_GCREF] ? -1 : member_offset(&defs[S_GCREF], "gcptr64") == 0 ? 1 :
		  member_offset(&defs[S_GCREF], "gcptr32") == 0 ? 0 : -1;
	if (have[S_GG] && have[S_G]) {
		Dwarf_Word g = member_offset(&defs[S_GG], "g"), disp = member_offset(&defs[S_GG], "dispatch");

		t->lj.gg_g = g;
		t->lj.disp2g = (__s32)((long long)g - (long long)disp);
		t->lj.g_vmstate = member_offset(&defs[S_G], "vmstate");
	}
	if (t->jit && have[S_GG] && have[S_JIT]) {
		t->lj.gg_j = member_offset(&defs[S_GG], "J");
		t->lj.J_state = member_offset(&defs[S_JIT], "state");
		t->lj.J_flags = member_offset(&defs[S_JIT], "flags");
	}
	if (t->jit && have[S_GCTRACE] && have[S_JIT]) {
		Dwarf_Word cur = member_offset(&defs[S_JIT], "cur");
		const char *slash = strrchr(path, '/');
		char dir[4096];

		t->lj.J_cur_traceno = cur + member_offset(&defs[S_GCTRACE], "traceno");
		t->lj.J_cur_link = cur + member_offset(&defs[S_GCTRACE], "link");
		t->lj.J_cur_linktype = cur + member_offset(&defs[S_GCTRACE], "linktype");
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
		dwarf_sites(dw, ef, dir, t);
	} else if (!t->jit) {
		/* No JIT: any offsets do; the search must still come back empty. */
		t->lj.J_cur_traceno = 104, t->lj.J_cur_link = 106, t->lj.J_cur_linktype = 116;
	}
	ret = t->vm_lo && t->vm_hi && t->gc && (!t->jit || t->nsites) && t->lj.gg_g && t->lj.g_vmstate &&
	      t->gc64 >= 0 ? 0 : -1;
out:
	if (dw)
		dwarf_end(dw);
	if (fd >= 0)
		close(fd);
	elf_file__close(ef);
	return ret;
}

/* ---------------------------------------------------------------------------
 * Files: strip, copy, patch
 */

static int run(char *const argv[])
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

static int strip_copy(const char *src, const char *dst)
{
	char *argv[] = { "strip", "-o", (char *)dst, (char *)src, NULL };

	return run(argv);
}

static int copy_file(const char *src, const char *dst)
{
	char *argv[] = { "cp", "-f", (char *)src, (char *)dst, NULL };

	return run(argv);
}

/* Overwrite the instruction at vaddr of file path with NOPs (0x90 each:
 * valid instructions, the same length in all). */
static int nop_out(const char *path, __u64 vaddr)
{
	struct elf_file *ef = elf_file__open(path);
	__u64 lo, hi, off;
	const __u8 *p;
	cs_insn *in;
	__u8 nops[16];
	int fd, ret = -1;

	if (!ef)
		return -1;
	p = elf_file__code_at(ef, vaddr, &lo, &hi);
	off = elf_file__vaddr_to_offset(ef, vaddr);
	if (p && off != ELF_FILE_NOADDR && cs_disasm(T.cs, p + (vaddr - lo), 16, vaddr, 1, &in) == 1) {
		memset(nops, 0x90, sizeof(nops));
		fd = open(path, O_WRONLY);
		if (fd >= 0 && pwrite(fd, nops, in->size, off) == in->size)
			ret = 0;
		if (fd >= 0)
			close(fd);
		cs_free(in, 1);
	}
	elf_file__close(ef);
	return ret;
}

/* ---------------------------------------------------------------------------
 * The checks
 */

static void print_sites(const char *label, const struct lj_code_sites *s, double ms)
{
	printf("    %s: vm 0x%llx-0x%llx gc 0x%llx%s%s abort 0x%llx", label,
	       (unsigned long long)s->vm_lo, (unsigned long long)s->vm_hi,
	       (unsigned long long)s->gc_cycle, s->gc_cycle ? "" : " ", s->gc_why,
	       (unsigned long long)s->abort_site);
	for (int i = 0; i < s->abort_nmore; i++)
		printf("+0x%llx", (unsigned long long)s->abort_more[i]);
	printf(" J in %s%s%s (%.1f ms)\n", code_sites__reg_name(s->abort_j_reg),
	       s->abort_site ? "" : " ", s->abort_why, ms);
}

/* Is every site of t found, and nothing else? */
static void check_abort_sites(const struct truth *t, const struct lj_code_sites *s, const char *what)
{
	if (!t->jit) {
		check(!s->abort_site && !strncmp(s->abort_why, "not found: no JIT", 17),
		      "%s: a build without JIT gives abort 0x%llx (%s)", what,
		      (unsigned long long)s->abort_site, s->abort_why);
		return;
	}
	check(s->abort_site == t->sites[0], "%s: abort site 0x%llx, want 0x%llx (%s)", what,
	      (unsigned long long)s->abort_site, (unsigned long long)t->sites[0], s->abort_why);
	check(s->abort_nmore == t->nsites - 1, "%s: %d copies of the abort jcc, want %d", what,
	      s->abort_nmore, t->nsites - 1);
	for (int i = 1; i < t->nsites && i - 1 < s->abort_nmore; i++)
		check(s->abort_more[i - 1] == t->sites[i], "%s: copy 0x%llx, want 0x%llx", what,
		      (unsigned long long)s->abort_more[i - 1], (unsigned long long)t->sites[i]);
	check(s->abort_j_reg >= 0, "%s: no J register", what);
}

/* The registry's sites and J->cur offsets for the build, when it knows it
 * by .text. */
static void check_registry(const char *path, const struct truth *t, const struct lj_code_sites *s)
{
	struct elf_file *ef = elf_file__open(path);
	unsigned char sha[32];
	__u64 reg;

	if (!ef || elf_file__text_sha256(ef, sha)) {
		elf_file__close(ef);
		return;
	}
	for (int i = 0; i < lj_nknown_builds; i++) {
		const struct lj_build *b = &lj_known_builds[i];

		if (memcmp(b->text_sha256, sha, 32))
			continue;
		check(lj_build__sym(b, "lj_gc_separateudata") == s->gc_cycle,
		      "registry %s: lj_gc_separateudata 0x%llx", b->id,
		      (unsigned long long)lj_build__sym(b, "lj_gc_separateudata"));
		check(b->layout.J_cur_traceno == t->lj.J_cur_traceno &&
		      b->layout.J_cur_link == t->lj.J_cur_link && b->layout.J_cur_linktype == t->lj.J_cur_linktype,
		      "registry %s: J->cur traceno/link/linktype at %u/%u/%u, DWARF %u/%u/%u", b->id,
		      b->layout.J_cur_traceno, b->layout.J_cur_link, b->layout.J_cur_linktype,
		      t->lj.J_cur_traceno, t->lj.J_cur_link, t->lj.J_cur_linktype);
		reg = lj_build__sym(b, "trace_abort@traceno");
		if (reg)	/* the site finder steps over a test to the jcc (abort_jcc) */
			check(next_jcc(ef, reg) == s->abort_site, "registry %s: trace_abort@traceno 0x%llx",
			      b->id, (unsigned long long)reg);
		printf("    registry %s agrees%s\n", b->id, reg ? "" : " (it has no trace_abort@traceno)");
	}
	elf_file__close(ef);
}

static void check_verify(const char *path, const struct truth *t, const struct lj_code_sites *s)
{
	const struct lj_layout *lj = &t->lj;
	char err[256];

	__u64 gc = s->gc_cycle ? s->gc_cycle : t->gc;	/* an entry either way */

	check(!code_sites__verify(path, gc, CODE_SITE_FUNC_ENTRY, lj, err, sizeof(err)),
	      "verify refuses the function entry 0x%llx: %s", (unsigned long long)gc, err);
	check(code_sites__verify(path, gc + 1, CODE_SITE_FUNC_ENTRY, lj, err, sizeof(err)),
	      "verify takes 0x%llx + 1 for a function entry", (unsigned long long)gc);
	check(code_sites__verify(path, s->vm_lo + 1, CODE_SITE_TRACENO_JCC, lj, err, sizeof(err)),
	      "verify takes vm_lo + 1 for the traceno jcc");
	if (!s->abort_site)
		return;
	check(!code_sites__verify(path, s->abort_site, CODE_SITE_TRACENO_JCC, lj, err, sizeof(err)),
	      "verify refuses the abort site: %s", err);
	for (int i = 0; i < s->abort_nmore; i++)
		check(!code_sites__verify(path, s->abort_more[i], CODE_SITE_TRACENO_JCC, lj, err, sizeof(err)),
		      "verify refuses copy 0x%llx: %s", (unsigned long long)s->abort_more[i], err);
	check(code_sites__verify(path, s->abort_site + 1, CODE_SITE_TRACENO_JCC, lj, err, sizeof(err)) &&
	      strstr(err, "boundary"), "verify takes the middle of the abort jcc (%s)", err);
	check(code_sites__verify(path, s->abort_site, CODE_SITE_FUNC_ENTRY, lj, err, sizeof(err)),
	      "verify takes the abort site for a function entry");
}

/* Copies of the stripped file with the jccs, or the traceno load, made NOPs. */
static void check_broken(const char *stripped, const struct truth *t, const struct lj_code_sites *s)
{
	struct lj_code_sites b;
	char path[128], err[256];
	int r;

	if (!s->abort_site)
		return;
	/* A site verified in one file holds for that file only: the same path
	 * rewritten in place is decoded again. Its mtime is set a minute on, not
	 * left to the clock's tick (the file test is kept_file()'s). */
	snprintf(path, sizeof(path), "%s/rewritten", T.tmp);
	check(!copy_file(stripped, path), "cannot copy %s", stripped);
	check(!code_sites__verify(path, s->abort_site, CODE_SITE_TRACENO_JCC, &t->lj, err, sizeof(err)),
	      "verify refuses the abort site of a copy: %s", err);
	check(!nop_out(path, s->abort_site) &&
	      !utimensat(AT_FDCWD, path, (struct timespec[2]){ { 0, UTIME_OMIT }, { time(NULL) + 60, 0 } }, 0),
	      "cannot rewrite the copy");
	check(code_sites__verify(path, s->abort_site, CODE_SITE_TRACENO_JCC, &t->lj, err, sizeof(err)),
	      "the abort site verified before its file was rewritten is still taken");
	snprintf(path, sizeof(path), "%s/broken", T.tmp);
	check(!copy_file(stripped, path) && !nop_out(path, s->abort_site), "cannot make a broken copy");
	for (int i = 0; i < s->abort_nmore; i++)
		check(!nop_out(path, s->abort_more[i]), "cannot break copy %d", i);
	r = code_sites__find(path, &t->lj, &b, err, sizeof(err));
	check(!r && !b.abort_site, "jccs made NOPs: abort site still found at 0x%llx (%s)",
	      (unsigned long long)b.abort_site, r ? err : b.abort_why);
	check(code_sites__verify(path, s->abort_site, CODE_SITE_TRACENO_JCC, &t->lj, err, sizeof(err)),
	      "jccs made NOPs: verify still takes 0x%llx", (unsigned long long)s->abort_site);
	printf("    jccs made NOPs: %s; verify: %s\n", b.abort_why, err);
	if (!t->load) {
		printf("    (no line-table address for the load of traceno: not broken)\n");
		return;
	}
	check(!copy_file(stripped, path) && !nop_out(path, t->load), "cannot make a broken copy");
	r = code_sites__find(path, &t->lj, &b, err, sizeof(err));
	check(!r && b.abort_site != s->abort_site, "traceno load made NOPs: abort site still 0x%llx (%s)",
	      (unsigned long long)b.abort_site, r ? err : b.abort_why);
	check(code_sites__verify(path, s->abort_site, CODE_SITE_TRACENO_JCC, &t->lj, err, sizeof(err)),
	      "traceno load made NOPs: verify still takes 0x%llx", (unsigned long long)s->abort_site);
	printf("    load 0x%llx made NOPs: abort 0x%llx; verify: %s\n", (unsigned long long)t->load,
	       (unsigned long long)b.abort_site, err);
}

/* ---------------------------------------------------------------------------
 * Facts of the build: GC64, struct offsets, layouts
 */

/* The registry's layout of a tree ("luajit", "luajit2"): its executable's. */
static const struct lj_layout *registry_layout(const char *tree)
{
	char id[64];

	snprintf(id, sizeof(id), "debian-%s-bin", tree);
	for (int i = 0; i < lj_nknown_builds; i++)
		if (!strcmp(lj_known_builds[i].id, id))
			return &lj_known_builds[i].layout;
	return NULL;
}

static __s64 g2j(const struct lj_layout *lj)
{
	return (__s64)lj->gg_j - lj->gg_g;
}

/* Does lj agree with the build's DWARF on what code_sites__layout_fits
 * checks: GC64, the vmstate's displacement from DISPATCH, and when both
 * have a jit_State, J->state and J->flags from g? */
static bool agrees(const struct lj_layout *lj, const struct truth *t)
{
	const struct lj_layout *d = &t->lj;

	if (t->gc64 != 1 || (__s64)lj->disp2g + lj->g_vmstate != (__s64)d->disp2g + d->g_vmstate)
		return false;
	if (!lj->gg_j || !d->gg_j)
		return true;
	return g2j(lj) + lj->J_state == g2j(d) + d->J_state && g2j(lj) + lj->J_flags == g2j(d) + d->J_flags;
}

static bool has_disp(const __s64 *v, int n, __s64 x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static void expect_fit(const char *path, const char *what, const struct lj_layout *lj, bool want,
		       const char *because)
{
	char why[256] = "";
	double t0 = now_ms(), ms;
	bool fits = code_sites__layout_check(path, lj, why, sizeof(why));

	ms = now_ms() - t0;
	printf("    layout %s: %s (%.1f ms) %s\n", what, fits ? "fits" : "does not fit", ms, why);
	check(fits == want, "layout %s %s, want %s", what, fits ? "fits" : "does not fit",
	      want ? "fits" : "does not fit");
	check(fits || !because || strstr(why, because), "layout %s refused, but not for \"%s\"", what, because);
	check(code_sites__layout_fits(path, lj) == fits, "layout_fits and layout_check disagree on %s", what);
}

static void check_facts(const char *unstripped, const char *stripped, const char *tree, const struct truth *t)
{
	const char *other = strcmp(tree, "luajit") ? "luajit" : "luajit2";
	const struct lj_layout *own = registry_layout(tree), *oth = registry_layout(other);
	bool jit = t->gc64 == 1 && t->lj.gg_j;
	struct lj_layout dw, x;
	__s64 d[256], d2[256];
	char why[256], label[64];
	double t0 = now_ms(), ms;
	int g = code_sites__gc64(stripped, why, sizeof(why)), n, n2;

	ms = now_ms() - t0;
	printf("    gc64 %d (%.1f ms): %s\n", g, ms, why);
	check(g == t->gc64, "gc64 says %d, DWARF's GCRef %d", g, t->gc64);

	t0 = now_ms();
	n = code_sites__offsets_used(stripped, "luaJIT_setmode", d, 256);
	ms = now_ms() - t0;
	n2 = code_sites__offsets_used(unstripped, "luaJIT_setmode", d2, 256);
	check(n > 0 && n <= 256, "luaJIT_setmode: %d displacements", n);
	check(n == n2 && (n <= 0 || !memcmp(d, d2, (n < 256 ? n : 256) * sizeof(*d))),
	      "luaJIT_setmode: the stripped copy gives other displacements");
	printf("    luaJIT_setmode: %d displacements (%.1f ms)", n, ms);
	if (jit) {
		__s64 st = g2j(&t->lj) + t->lj.J_state, fl = g2j(&t->lj) + t->lj.J_flags;

		printf(", J->state at g+%lld, J->flags at g+%lld", (long long)st, (long long)fl);
		check(has_disp(d, n, st) && has_disp(d, n, fl), "luaJIT_setmode: no J->state (%lld) or "
		      "J->flags (%lld) displacement", (long long)st, (long long)fl);
	}
	printf("\n");
	check(code_sites__offsets_used(stripped, "no_such_function", d, 256) == -1,
	      "offsets_used of a missing function is not -1");

	if (!own || !oth) {
		check(0, "no registry entries debian-%s-bin, debian-%s-bin", tree, other);
		return;
	}
	/* The build's own layout: the registry's, with what is checked from DWARF. */
	dw = *own;
	dw.gg_g = t->lj.gg_g, dw.gg_j = t->lj.gg_j, dw.disp2g = t->lj.disp2g;
	dw.g_vmstate = t->lj.g_vmstate, dw.J_state = t->lj.J_state, dw.J_flags = t->lj.J_flags;
	expect_fit(stripped, "from DWARF", &dw, t->gc64 == 1, "not GC64");
	snprintf(label, sizeof(label), "%s (own tree)", tree);
	expect_fit(stripped, label, own, agrees(own, t), NULL);
	snprintf(label, sizeof(label), "%s (other tree)", other);
	expect_fit(stripped, label, oth, agrees(oth, t), NULL);
	check(!code_sites__layout_fits(stripped, oth), "the %s tree's layout fits", other);
	if (!jit)
		return;
	/* Each check alone: J placed as in the other tree, J->flags moved, the
	 * dispatch table moved; the rest as in DWARF. */
	x = dw;
	x.gg_g = oth->gg_g, x.gg_j = oth->gg_j;
	if (g2j(&x) != g2j(&dw))
		expect_fit(stripped, "DWARF with the other tree's gg_g/gg_j", &x, false, "luaJIT_setmode");
	x = dw;
	x.J_flags += 8;
	expect_fit(stripped, "DWARF with J_flags + 8", &x, false, "luaJIT_setmode");
	x = dw;
	x.disp2g -= 8;
	expect_fit(stripped, "DWARF with disp2g - 8", &x, false, "vmstate");
}

/* Each of the three, on one file: the mean of reps runs. */
static void time_facts(const char *path)
{
	const struct lj_layout *lj = registry_layout("luajit");
	char why[256];
	__s64 d[256];
	const int reps = 20;
	double t0, ms[3];
	struct elf_file *ef = elf_file__open(path);
	__u64 text = ef ? elf_file__text_size(ef) : 0;

	elf_file__close(ef);
	if (!lj)
		return;
	t0 = now_ms();
	for (int i = 0; i < reps; i++)
		code_sites__gc64(path, why, sizeof(why));
	ms[0] = (now_ms() - t0) / reps;
	t0 = now_ms();
	for (int i = 0; i < reps; i++)
		code_sites__offsets_used(path, "luaJIT_setmode", d, 256);
	ms[1] = (now_ms() - t0) / reps;
	t0 = now_ms();
	for (int i = 0; i < reps; i++)
		code_sites__layout_fits(path, lj);
	ms[2] = (now_ms() - t0) / reps;
	printf("== timing on %s (.text %llu KB), mean of %d: gc64 %.2f ms, offsets_used %.2f ms, "
	       "layout_fits %.2f ms\n", path, (unsigned long long)text / 1024, reps, ms[0], ms[1], ms[2]);
	for (int i = 0; i < 3; i++)
		check(ms[i] < FACTS_SLOW_MS, "a build fact took %.1f ms", ms[i]);
}

/* The timing of the build facts on a stripped copy of path. */
static void time_case(const char *path)
{
	char copy[128];

	T.bad = 0;
	snprintf(copy, sizeof(copy), "%s/timing", T.tmp);
	if (strip_copy(path, copy))
		check(0, "strip %s failed", path);
	else
		time_facts(copy);
	if (T.bad)
		T.failed++;
	else
		T.passed++;
	printf("   %s\n", T.bad ? "FAILED" : "ok");
}

static bool same_sites(const struct lj_code_sites *a, const struct lj_code_sites *b)
{
	return a->vm_lo == b->vm_lo && a->vm_hi == b->vm_hi && a->gc_cycle == b->gc_cycle &&
	       a->abort_site == b->abort_site && a->abort_j_reg == b->abort_j_reg &&
	       a->abort_nmore == b->abort_nmore &&
	       !memcmp(a->abort_more, b->abort_more, sizeof(a->abort_more));
}

/* One build: unstripped gives the truth; stripped (NULL: a stripped copy of
 * it) is searched. */
static void run_case(const char *label, const char *tree, const char *unstripped, const char *stripped)
{
	struct lj_code_sites s, full;
	struct truth t;
	char copy[128], err[256] = "", err2[256] = "";
	double t0, ms, ms_full;

	printf("== %s\n", label);
	T.bad = 0;
	if (read_truth(unstripped, &t)) {
		check(0, "%s: no symbols/DWARF to compare with", unstripped);
		goto done;
	}
	if (!stripped) {
		snprintf(copy, sizeof(copy), "%s/stripped", T.tmp);
		if (strip_copy(unstripped, copy)) {
			check(0, "strip %s failed", unstripped);
			goto done;
		}
		stripped = copy;
	}
	t0 = now_ms();
	check(!code_sites__find(stripped, &t.lj, &s, err, sizeof(err)), "find: %s", err);
	ms = now_ms() - t0;
	t0 = now_ms();
	check(!code_sites__find_opts(stripped, &t.lj, CODE_SITES_FULL_SCAN, &full, err2, sizeof(err2)),
	      "full scan: %s", err2);
	ms_full = now_ms() - t0;
	print_sites("found", &s, ms);
	printf("    full scan agrees: %s (%.1f ms)\n", same_sites(&s, &full) ? "yes" : "NO", ms_full);
	check(same_sites(&s, &full), "the full scan finds otherwise");
	check(ms < SLOW_MS, "find took %.0f ms", ms);
	check(s.vm_lo == t.vm_lo && s.vm_hi == t.vm_hi, "vm 0x%llx-0x%llx, want 0x%llx-0x%llx",
	      (unsigned long long)s.vm_lo, (unsigned long long)s.vm_hi,
	      (unsigned long long)t.vm_lo, (unsigned long long)t.vm_hi);
	if (t.gc_per_cycle)
		check(s.gc_cycle == t.gc, "gc 0x%llx, want 0x%llx (%s)", (unsigned long long)s.gc_cycle,
		      (unsigned long long)t.gc, s.gc_why);
	else	/* inlined into the atomic phase: the symbol is not hit per cycle */
		check(!s.gc_cycle && strstr(s.gc_why, "(g, 0)"), "gc 0x%llx, want none: lj_gc_separateudata "
		      "(0x%llx) is called from lua_close only", (unsigned long long)s.gc_cycle,
		      (unsigned long long)t.gc);
	check_abort_sites(&t, &s, "find");
	check_registry(stripped, &t, &s);
	check_verify(stripped, &t, &s);
	check_broken(stripped, &t, &s);
	check_facts(unstripped, stripped, tree, &t);
done:
	if (T.bad)
		T.failed++;
	else
		T.passed++;
	printf("   %s\n", T.bad ? "FAILED" : "ok");
}

/* A build with nothing to compare with: print what is found. */
static void show(const char *label, const char *path)
{
	struct lj_code_sites s;
	struct lj_layout lj = lj_known_builds[0].layout;
	char err[256];
	double t0 = now_ms(), ms;
	int r;

	if (!exists(path))
		return;
	if (!lj.J_cur_link)	/* a registry from before J_cur_link: the value of all known builds */
		lj.J_cur_link = 106, lj.J_cur_linktype = 116;
	r = code_sites__find(path, &lj, &s, err, sizeof(err));
	ms = now_ms() - t0;
	printf("== %s (%s)\n", label, path);
	if (r) {
		printf("    not usable: %s\n", err);
		return;
	}
	print_sites("found", &s, ms);
	if (s.abort_site)
		printf("    verify abort site: %s\n",
		       code_sites__verify(path, s.abort_site, CODE_SITE_TRACENO_JCC, &lj, err, sizeof(err)) ?
		       err : "ok");
	if (s.gc_cycle)
		printf("    verify gc probe: %s\n",
		       code_sites__verify(path, s.gc_cycle, CODE_SITE_FUNC_ENTRY, &lj, err, sizeof(err)) ?
		       err : "ok");
	printf("    gc64 %d: ", code_sites__gc64(path, err, sizeof(err)));
	printf("%s\n", err);
	for (int i = 0; i < lj_nknown_builds; i++)
		if (!strcmp(lj_known_builds[i].kind, "exe")) {
			bool fits = code_sites__layout_check(path, &lj_known_builds[i].layout, err, sizeof(err));

			printf("    layout %s: %s: %s\n", lj_known_builds[i].id, fits ? "fits" : "does not fit", err);
		}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_variants(void)
{
	DIR *d = opendir("build/variants");
	struct dirent *e;
	char *names[64];
	int n = 0;

	if (!d) {
		printf("== no build/variants (scripts/build-variants.sh builds them)\n");
		return;
	}
	while ((e = readdir(d)) && n < 64)
		if (e->d_name[0] != '.')
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	for (int i = 0; i < n; i++) {
		static const char *const files[] = { "luajit", "libluajit.so" };
		char path[512], stamp[512], label[128];
		/* OpenResty's fork is the luajit2 tree; upstream is luajit's. */
		const char *tree = !strncmp(names[i], "luajit2-", 8) || !strncmp(names[i], "openresty-", 10) ?
				   "luajit2" : "luajit";

		snprintf(stamp, sizeof(stamp), "build/variants/%s/.nupp-variant", names[i]);
		for (int k = 0; k < 2 && exists(stamp); k++) {
			snprintf(path, sizeof(path), "build/variants/%s/src/%s", names[i], files[k]);
			snprintf(label, sizeof(label), "variant %s %s", names[i], files[k]);
			run_case(label, tree, path, NULL);
		}
		free(names[i]);
	}
}

int main(void)
{
	static const char *const trees[] = { "luajit", "luajit2" };

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &T.cs) != CS_ERR_OK) {
		fprintf(stderr, "cannot open capstone\n");
		return 1;
	}
	snprintf(T.tmp, sizeof(T.tmp), "/tmp/nupp-code-sites.XXXXXX");
	if (!mkdtemp(T.tmp)) {
		perror("mkdtemp");
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		char exe[256], lib[256], stock_exe[256], stock_lib[256], label[128];

		snprintf(exe, sizeof(exe), "build/luajit/%s/src/luajit", trees[i]);
		snprintf(lib, sizeof(lib), "build/luajit/%s/src/libluajit.so", trees[i]);
		snprintf(stock_exe, sizeof(stock_exe), "build/stock/%s/usr/bin/luajit", trees[i]);
		snprintf(stock_lib, sizeof(stock_lib), "build/stock/%s/usr/lib/x86_64-linux-gnu/"
			 "libluajit-5.1.so.2", trees[i]);
		snprintf(label, sizeof(label), "pinned %s luajit", trees[i]);
		run_case(label, trees[i], exe, NULL);
		snprintf(label, sizeof(label), "pinned %s libluajit.so", trees[i]);
		run_case(label, trees[i], lib, NULL);
		snprintf(label, sizeof(label), "stock %s luajit", trees[i]);
		if (exists(stock_exe))
			run_case(label, trees[i], exe, stock_exe);
		snprintf(label, sizeof(label), "stock %s libluajit-5.1.so.2", trees[i]);
		if (exists(stock_lib))
			run_case(label, trees[i], lib, stock_lib);
	}
	time_case("build/luajit/luajit/src/luajit");
	run_variants();
	show("Debian 13 luajit", "build/roots/trixie/usr/bin/luajit");
	show("Debian 13 libluajit-5.1.so.2", "build/roots/trixie/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2");
	{
		char *argv[] = { "rm", "-rf", T.tmp, NULL };

		run(argv);
	}
	cs_close(&T.cs);
	printf("%d passed, %d failed\n", T.passed, T.failed);
	return T.failed ? 1 : 0;
}
