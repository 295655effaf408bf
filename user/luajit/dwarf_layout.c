// SPDX-License-Identifier: MIT
/*
 * dwarf_layout.c - struct lj_layout from DWARF, through elfutils libdw.
 *
 * Each field of struct lj_layout is a member offset (possibly nested, as
 * jit_State.cur.startpt), a struct size, or GG_DISP2G, in one of twelve
 * LuaJIT types. The reader walks the top-level DIEs of each compile unit
 * once, keeps the first complete definition of each type it needs, and
 * stops as soon as it has all twelve: in a full LuaJIT (the amalgamated
 * build is one CU) that is a single pass over one CU's top level. A build
 * without the JIT compiler (LUAJIT_DISABLE_JIT) has no jit_State in its
 * GG_State, which is then smaller (disp2g differs): gg_j and the fields of
 * the compiler's types (J_*, tr_*, sn_*, ir_*) are 0 there, and only there,
 * never for a missing type. Files are opened
 * through libdwfl, which applies the relocations of a .o file: without
 * them every name in a probe object would read as the same string.
 */
#include <fcntl.h>
#include <gelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include "dwarf_layout.h"

enum lj_type { T_GG, T_G, T_L, T_GCH, T_FNL, T_FNC, T_PT, T_STR, T_J, T_TR, T_SN, T_IR, T_TAB,
	       T_NODE, T_UD, T_UV, T_CD, T__MAX };

/* The types of the JIT compiler: a build without it (LUAJIT_DISABLE_JIT)
 * need not describe them, and its fields of them stay 0. */
static bool jit_type(int t)
{
	return t == T_J || t == T_TR || t == T_SN || t == T_IR;
}

/* The types the mapping of compiled samples reads (GCtrace, its snapshots,
 * its IR). Revisions before 2021-03 (upstream a32aeadc) have no
 * SnapShot.mcofs: there the mapping is off, and all their fields are 0
 * (tr_size 0 says so), rather than the build unreadable. */
static bool trace_type(int t)
{
	return t == T_TR || t == T_SN || t == T_IR;
}

/* The fields the heap's census reads (from g_gc_total on, the end of
 * struct lj_layout): a revision that lacks one of them (no g->str before
 * 2020-06) gets them all 0, which turns the census off, rather than the
 * build unreadable. */
static bool heap_field(size_t off)
{
	return off >= offsetof(struct lj_layout, g_gc_total);
}

/* Typedef names; the struct tags are the same in LuaJIT. */
static const char *const type_names[T__MAX] = {
	"GG_State", "global_State", "lua_State", "GChead", "GCfuncL", "GCfuncC",
	"GCproto", "GCstr", "jit_State", "GCtrace", "SnapShot", "IRIns", "GCtab",
	"Node", "GCudata", "GCupval", "GCcdata",
};

enum kind { K_OFFSET, K_SIZE, K_DISP2G };

struct field {
	const char *name;
	enum lj_type type;
	const char *member;	/* dotted path for nested members */
	enum kind kind;
	size_t off;		/* in struct lj_layout */
};

#define OFS(f, t, m)	{ #f, t, m, K_OFFSET, offsetof(struct lj_layout, f) },
#define SIZE(f, t)	{ #f, t, NULL, K_SIZE, offsetof(struct lj_layout, f) },
#define DISP2G(f, t)	{ #f, t, NULL, K_DISP2G, offsetof(struct lj_layout, f) },

static const struct field fields[] = {
#include "lj_layout.def"
};
#undef OFS
#undef SIZE
#undef DISP2G

#define NFIELDS ((int)(sizeof(fields) / sizeof(fields[0])))

/* Every field is 4 bytes: a new field of lj_layout without an entry in
 * lj_layout.def shows up here as a size mismatch at compile time. */
_Static_assert(sizeof(struct lj_layout) == sizeof(fields) / sizeof(fields[0]) * 4,
	       "struct lj_layout has a field dwarf_layout.c does not read");

/* Write the reason into err; -1, to return. */
static int fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

bool dwarf_layout__present(const char *path)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	bool found = false;
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && !elf_getshdrstrndx(elf, &shstrndx)) {
		while (!found && (scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			const char *name;

			if (!gelf_getshdr(scn, &sh))
				break;
			name = elf_strptr(elf, shstrndx, sh.sh_name);
			/* A stripped debug file keeps the header as NOBITS. */
			found = name && (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info")) &&
				sh.sh_type != SHT_NOBITS && sh.sh_size > 0;
		}
	}
	elf_end(elf);
	close(fd);
	return found;
}

/* The caller names the debug file itself (a target's own root, not ours):
 * no search of this host's /usr/lib/debug. */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	return -1;
}

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = no_debuginfo,
	.section_address = dwfl_offline_section_address,
};

/* Through typedefs and qualifiers to the type itself. */
static Dwarf_Die *strip_type(Dwarf_Die *die, Dwarf_Die *mem)
{
	for (;;) {
		int tag = dwarf_tag(die);
		Dwarf_Attribute attr;

		if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type)
			return die;
		if (!dwarf_attr_integrate(die, DW_AT_type, &attr) || !dwarf_formref_die(&attr, mem))
			return NULL;
		die = mem;
	}
}

static Dwarf_Die *member_type(Dwarf_Die *member, Dwarf_Die *mem)
{
	Dwarf_Attribute attr;

	if (!dwarf_attr_integrate(member, DW_AT_type, &attr) || !dwarf_formref_die(&attr, mem))
		return NULL;
	return strip_type(mem, mem);
}

/* A complete struct definition, not a declaration of an opaque type. */
static bool is_definition(Dwarf_Die *die)
{
	int tag = dwarf_tag(die);

	return (tag == DW_TAG_structure_type || tag == DW_TAG_union_type) &&
	       !dwarf_hasattr(die, DW_AT_declaration) && dwarf_hasattr(die, DW_AT_byte_size);
}

/* DW_AT_data_member_location: a constant, or in older DWARF an expression
 * DW_OP_plus_uconst N; absent for union members, whose offset is 0. */
static int member_offset(Dwarf_Die *member, Dwarf_Word *off)
{
	Dwarf_Attribute attr;
	Dwarf_Op *ops;
	size_t nops;

	if (!dwarf_attr_integrate(member, DW_AT_data_member_location, &attr)) {
		*off = 0;
		return 0;
	}
	if (dwarf_formudata(&attr, off) == 0)
		return 0;
	if (dwarf_getlocation(&attr, &ops, &nops) == 0 && nops == 1 &&
	    ops[0].atom == DW_OP_plus_uconst) {
		*off = ops[0].number;
		return 0;
	}
	return -1;
}

/* Member name of struct die, also inside anonymous struct/union members;
 * *off accumulates its offset. */
static int find_member(Dwarf_Die *die, const char *name, size_t len, Dwarf_Die *out, Dwarf_Word *off)
{
	Dwarf_Die child, tmem;

	if (dwarf_child(die, &child))
		return -1;
	do {
		const char *n = dwarf_diename(&child);
		Dwarf_Word o;

		if (dwarf_tag(&child) != DW_TAG_member || member_offset(&child, &o))
			continue;
		if (n && strlen(n) == len && !strncmp(n, name, len)) {
			*out = child;
			*off += o;
			return 0;
		}
		if (!n) {
			Dwarf_Die *t = member_type(&child, &tmem);
			Dwarf_Word inner = 0;

			if (t && is_definition(t) && !find_member(t, name, len, out, &inner)) {
				*off += o + inner;
				return 0;
			}
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return -1;
}

/* Offset of a dotted member path ("cur.startpt") in struct die. */
static int path_offset(Dwarf_Die *die, const char *path, Dwarf_Word *off)
{
	Dwarf_Die cur = *die, member, tmem;

	*off = 0;
	for (;;) {
		const char *dot = strchr(path, '.');
		size_t len = dot ? (size_t)(dot - path) : strlen(path);
		Dwarf_Die *t;

		if (find_member(&cur, path, len, &member, off))
			return -1;
		if (!dot)
			return 0;
		t = member_type(&member, &tmem);
		if (!t || !is_definition(t))
			return -1;
		cur = *t;
		path = dot + 1;
	}
}

static int lookup_name(const char *name)
{
	for (int t = 0; t < T__MAX; t++)
		if (!strcmp(name, type_names[t]))
			return t;
	return -1;
}

/* Whether GG_State holds a jit_State J (LJ_HASJIT). */
static bool has_jit(Dwarf_Die *gg)
{
	Dwarf_Die member;
	Dwarf_Word off = 0;

	return find_member(gg, "J", 1, &member, &off) == 0;
}

/* Keep die as the type it names, when it is one we still need. */
static int note_type(Dwarf_Die *die, Dwarf_Die *types, bool *have)
{
	int tag = dwarf_tag(die), t;
	const char *name;
	Dwarf_Die mem, *def = die;

	if (tag != DW_TAG_typedef && tag != DW_TAG_structure_type)
		return 0;
	name = dwarf_diename(die);
	if (!name || (t = lookup_name(name)) < 0 || have[t])
		return 0;
	if (tag == DW_TAG_typedef)
		def = strip_type(die, &mem);
	if (!def || !is_definition(def))
		return 0;
	types[t] = *def;
	have[t] = true;
	/* No J in GG_State: no jit_State, trace, snapshot or IR type to
	 * wait for (the JIT-less build may still define them in some unit,
	 * unused). */
	if (t == T_GG && !has_jit(def)) {
		int n = 1;

		for (int j = 0; j < T__MAX; j++)
			if (jit_type(j) && !have[j]) {
				have[j] = true;
				n++;
			}
		return n;
	}
	return 1;
}

/* One pass over the top level of each CU, until all types are found. */
static int find_types(Dwarf *dw, Dwarf_Die *types, bool *have)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	int left = T__MAX;

	while (left > 0 && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu, child;

		if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_child(&cu, &child) == 0) {
			do
				left -= note_type(&child, types, have);
			while (left > 0 && dwarf_siblingof(&child, &child) == 0);
		}
		off = next;
	}
	return left;
}

static int read_field(const struct field *f, Dwarf_Die *types, bool jit, struct lj_layout *out,
		      char *err, size_t errsz)
{
	Dwarf_Die *die = &types[f->type];
	const char *tn = type_names[f->type];
	Dwarf_Word a, b;
	__u32 v;
	int size;

	if (!jit && (jit_type(f->type) || f->off == offsetof(struct lj_layout, gg_j)))
		return 0;	/* stays 0: see the top of the file */
	switch (f->kind) {
	case K_SIZE:
		size = dwarf_bytesize(die);
		if (size <= 0)
			return fail(err, errsz, "%s: no size for %s", f->name, tn);
		v = size;
		break;
	case K_DISP2G:
		/* GG_DISP2G in lj_dispatch.h: from the dispatch table to g. */
		if (path_offset(die, "g", &a) || path_offset(die, "dispatch", &b))
			return fail(err, errsz, "%s: %s has no member g or dispatch", f->name, tn);
		v = (__u32)(__s32)((long long)a - (long long)b);
		break;
	default:
		if (path_offset(die, f->member, &a))
			return fail(err, errsz, "%s: %s has no member %s", f->name, tn, f->member);
		v = a;
	}
	memcpy((char *)out + f->off, &v, sizeof(v));
	return 0;
}

static int read_fields(Dwarf *dw, struct lj_layout *out, char *err, size_t errsz)
{
	Dwarf_Die types[T__MAX];
	bool have[T__MAX] = { false }, jit, no_map = false, no_heap = false;

	if (find_types(dw, types, have)) {
		for (int t = 0; t < T__MAX; t++)
			if (!have[t])
				return fail(err, errsz, "no definition of %s in its DWARF", type_names[t]);
	}
	jit = has_jit(&types[T_GG]);
	for (int i = 0; i < NFIELDS; i++) {
		if (!read_field(&fields[i], types, jit, out, err, errsz))
			continue;
		if (heap_field(fields[i].off))
			no_heap = true;	/* a member the census needs is missing */
		else if (trace_type(fields[i].type))
			no_map = true;	/* a member the mapping needs is missing */
		else
			return -1;
	}
	for (int i = 0; i < NFIELDS; i++)
		if ((no_heap && heap_field(fields[i].off)) ||
		    (no_map && trace_type(fields[i].type) && !heap_field(fields[i].off)))
			memset((char *)out + fields[i].off, 0, sizeof(__u32));
	err[0] = '\0';
	return 0;
}

int dwarf_layout__read(const char *path, struct lj_layout *out, char *err, size_t errsz)
{
	Dwfl *dwfl = dwfl_begin(&offline_callbacks);
	Dwfl_Module *mod;
	Dwarf_Addr bias;
	Dwarf *dw;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (!dwfl)
		return fail(err, errsz, "libdwfl: %s", dwfl_errmsg(-1));
	mod = dwfl_report_offline(dwfl, path, path, -1);
	dwfl_report_end(dwfl, NULL, NULL);
	dw = mod ? dwfl_module_getdwarf(mod, &bias) : NULL;
	if (!dw)
		fail(err, errsz, "no DWARF (%s)", dwfl_errmsg(-1));
	else
		ret = read_fields(dw, out, err, errsz);
	dwfl_end(dwfl);
	return ret;
}

const char *dwarf_layout__field(const struct lj_layout *l, int i, long long *value)
{
	__u32 v;

	if (i < 0 || i >= NFIELDS)
		return NULL;
	memcpy(&v, (const char *)l + fields[i].off, sizeof(v));
	*value = fields[i].kind == K_DISP2G ? (long long)(__s32)v : (long long)v;
	return fields[i].name;
}
