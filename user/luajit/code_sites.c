// SPDX-License-Identifier: MIT
/*
 * code_sites.c - nupp-bpf's probe sites in a LuaJIT build, found in its code.
 *
 * A stripped build still has .eh_frame, the bounds of every function (its
 * entries framed by libdw), and its exported lua_* API. From those anchors
 * the interpreter blob, the GC cycle probe and the trace-abort jcc are found
 * by decoding instructions with capstone, each by what the code does rather
 * than by its bytes; a site must be unique or it is reported as not found,
 * with the reason. code_sites__verify() checks one address again by the same
 * rules, decoding from the start of its function, before it may become a
 * uprobe: a breakpoint inside an instruction corrupts the traced process.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <capstone/capstone.h>
#include <gelf.h>
#include <elfutils/libdw.h>
#include "code_sites.h"
#include "elf_file.h"
#include "base/util.h"

#define NO_REG		(-1)
#define RIP_REG		(-2)
#define BFS_DEPTH	3		/* interpreter -> lj_trace_hot -> lj_trace_ins */
#define BFS_MAX_FUNCS	1024
#define TEST_WINDOW	16		/* load of traceno .. its test */
#define JCC_WINDOW	6		/* test .. jcc */
#define PATH_INSNS	64		/* jcc .. the stores to link and linktype */
#define PATH_JUMPS	4
#define MAX_MATCHES	8
#define CALLER_SAVED	(1u << CODE_SITE_RAX | 1u << CODE_SITE_RCX | 1u << CODE_SITE_RDX | \
			 1u << CODE_SITE_RSI | 1u << CODE_SITE_RDI | 1u << CODE_SITE_R8 | \
			 1u << CODE_SITE_R9 | 1u << CODE_SITE_R10 | 1u << CODE_SITE_R11)

/* An operand, with registers as DWARF numbers (enum code_site_reg). */
struct opnd {
	__u8 type;		/* X86_OP_REG, X86_OP_IMM, X86_OP_MEM, 0 */
	__u8 size;		/* bytes */
	__s8 reg, base, index;	/* NO_REG, or RIP_REG as a base */
	__s64 v;		/* immediate, or displacement */
};

enum {
	IN_BRANCH = 1,		/* jmp or jcc */
	IN_JCC = 2,
	IN_CALL = 4,
	IN_STOP = 8,		/* ret, indirect jmp, trap: no fall-through */
	IN_ZF = 16,		/* writes ZF */
	IN_LABEL = 32,		/* a jump in the function lands here */
};

/* One instruction, the facts the matchers need. */
struct ins {
	__u64 addr;
	__u64 target;		/* a direct branch's target, a rip-relative operand's address */
	__u16 id;		/* X86_INS_* */
	__u8 size, flags;
	__u16 wregs;		/* GPRs written, by bit */
	struct opnd op[2];
};

/* Registers holding known values, from linear decoding (reset at labels). */
struct regs {
	__u16 known;
	__s64 v[16];
};

struct insns {
	struct ins *v;
	size_t n, cap;
};

/* A function's bounds, from its .eh_frame FDE. */
struct fde {
	__u64 lo, hi;
};

/* The file being read. */
struct cfile {
	struct elf_file *ef;
	struct fde *fdes;		/* sorted by lo */
	size_t nfdes;
	csh cs;
	cs_insn *ci;
	const struct lj_layout *lj;
	__u64 text_lo, text_hi;		/* the section holding the interpreter */
	const __u8 *text;
	__u64 vm_lo, vm_hi, cpcall;
	struct insns fn;		/* the function decoded last */
};

/* ---- .eh_frame: the bounds of every function ------------------------------ */

/* DW_EH_PE_* pointer encodings (the LSB / gABI .eh_frame format). */
#define PE_OMIT		0xff
#define PE_FORMAT	0x0f
#define PE_APPLY	0x70
#define PE_PCREL	0x10

/* Read a value of encoding enc at *p (< end), moving *p past it; field is
 * its address, for pc-relative values. 0, or -1 for what .eh_frame of an
 * x86-64 ELF file does not use (datarel, textrel, funcrel, aligned). */
static int read_encoded(const __u8 **p, const __u8 *end, __u8 enc, __u64 field, __u64 *out)
{
	static const __u8 sizes[16] = { [0x0] = 8, [0x2] = 2, [0x3] = 4, [0x4] = 8,
					[0xa] = 2, [0xb] = 4, [0xc] = 8 };
	__u8 size = sizes[enc & PE_FORMAT];
	__s64 v = 0;

	if (!size || *p + size > end || ((enc & PE_APPLY) && (enc & PE_APPLY) != PE_PCREL))
		return -1;
	if (size == 2) {
		__u16 x;

		memcpy(&x, *p, 2);
		v = (enc & 8) ? (__s64)(__s16)x : (__s64)x;
	} else if (size == 4) {
		__u32 x;

		memcpy(&x, *p, 4);
		v = (enc & 8) ? (__s64)(__s32)x : (__s64)x;
	} else {
		memcpy(&v, *p, 8);
	}
	*p += size;
	*out = (enc & PE_APPLY) == PE_PCREL ? field + v : (__u64)v;
	return 0;
}

/* The encoding of FDE addresses a CIE announces ('R' in its augmentation);
 * absptr without one, PE_OMIT when it cannot be told. */
static __u8 cie_fde_encoding(const Dwarf_CIE *cie)
{
	const __u8 *d = cie->augmentation_data, *end = d + cie->augmentation_data_size;
	const char *a = cie->augmentation;

	if (a[0] != 'z')
		return a[0] ? PE_OMIT : 0;
	for (a++; *a && d < end; a++) {
		__u64 skip;

		switch (*a) {
		case 'R':
			return *d;
		case 'L':
			d++;
			break;
		case 'P':	/* the personality routine: its encoding, then it */
			d++;
			if (read_encoded(&d, end, d[-1] & PE_FORMAT, 0, &skip))
				return PE_OMIT;
			break;
		case 'S':
		case 'B':
			break;
		default:
			return PE_OMIT;
		}
	}
	return 0;
}

struct cie_enc {
	Dwarf_Off off;
	__u8 enc;
};

static int cmp_fde(const void *a, const void *b)
{
	const struct fde *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* One pass over .eh_frame (entries framed by libdw): the CIEs' encodings
 * when fdes is NULL, else the FDEs' ranges. Returns how many were read. */
static size_t cfi_pass(Elf *elf, Elf_Data *d, __u64 sec_addr, struct cie_enc *cies, size_t ncies,
		       struct fde *fdes, size_t max)
{
	const unsigned char *ident = (const unsigned char *)elf_getident(elf, NULL);
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;
	size_t n = 0;
	int r;

	while ((r = dwarf_next_cfi(ident, d, true, off, &next, &e)) != 1) {
		if (r == 0 && dwarf_cfi_cie_p(&e) && !fdes && n < max) {
			cies[n++] = (struct cie_enc){ off, cie_fde_encoding(&e.cie) };
		} else if (r == 0 && !dwarf_cfi_cie_p(&e) && fdes && n < max) {
			const __u8 *p = e.fde.start;
			__u8 enc = PE_OMIT;
			__u64 lo, len;

			for (size_t i = 0; i < ncies; i++)
				if (cies[i].off == e.fde.CIE_pointer)
					enc = cies[i].enc;
			if (enc != PE_OMIT &&
			    !read_encoded(&p, e.fde.end, enc, sec_addr + (p - (const __u8 *)d->d_buf), &lo) &&
			    !read_encoded(&p, e.fde.end, enc & PE_FORMAT, 0, &len) && len)
				fdes[n++] = (struct fde){ lo, lo + len };
		}
		if (next <= off)
			break;
		off = next;
	}
	return n;
}

/* The FDE table of the file, sorted. 0, or -1 without a usable .eh_frame. */
static int read_fdes(struct cfile *f)
{
	Elf *elf = elf_file__elf(f->ef);
	Elf_Scn *scn = NULL;
	struct cie_enc *cies;
	size_t shstrndx, max;
	GElf_Shdr sh;
	Elf_Data *d = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -1;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS &&
		    (name = elf_strptr(elf, shstrndx, sh.sh_name)) && !strcmp(name, ".eh_frame")) {
			d = elf_getdata(scn, NULL);
			break;
		}
	}
	if (!d || !d->d_buf || d->d_size < 8)
		return -1;
	/* An entry takes at least 8 bytes: bounds for both tables. */
	max = d->d_size / 8;
	cies = calloc(max, sizeof(*cies));
	f->fdes = calloc(max, sizeof(*f->fdes));
	if (!cies || !f->fdes) {
		free(cies);
		return -1;
	}
	size_t ncies = cfi_pass(elf, d, sh.sh_addr, cies, max, NULL, max);

	f->nfdes = cfi_pass(elf, d, sh.sh_addr, cies, ncies, f->fdes, max);
	free(cies);
	qsort(f->fdes, f->nfdes, sizeof(*f->fdes), cmp_fde);
	return f->nfdes ? 0 : -1;
}

/* The FDE covering addr: [*lo, *hi). 0, or -1 when none does. */
static int fde_range(struct cfile *f, __u64 addr, __u64 *lo, __u64 *hi)
{
	size_t a = 0, b = f->nfdes;

	while (a < b) {
		size_t mid = (a + b) / 2;

		if (f->fdes[mid].lo <= addr)
			a = mid + 1;
		else
			b = mid;
	}
	if (!a || addr >= f->fdes[a - 1].hi)
		return -1;
	*lo = f->fdes[a - 1].lo;
	*hi = f->fdes[a - 1].hi;
	return 0;
}

/* ---- the decoder ----------------------------------------------------------- *
 * capstone is loaded when code is first decoded, not at every start of
 * nupp-bpf: its tables carry ~77,000 relocations that the dynamic loader
 * applies before main, ~7 ms of every start (docs/benchmarks.md). */

#define CS_STR(x)	#x
#define CS_SONAME(v)	"libcapstone.so." CS_STR(v)

static struct {
	cs_err (*open)(cs_arch, cs_mode, csh *);
	cs_err (*option)(csh, cs_opt_type, size_t);
	cs_insn *(*insn_new)(csh);
	bool (*disasm_iter)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *);
	void (*insn_free)(cs_insn *, size_t);
	cs_err (*close)(csh *);
	bool ok;
} cs;

static void capstone_load_once(void)
{
	void *h = dlopen(CS_SONAME(CS_API_MAJOR), RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return;
	cs.open = (cs_err (*)(cs_arch, cs_mode, csh *))dlsym(h, "cs_open");
	cs.option = (cs_err (*)(csh, cs_opt_type, size_t))dlsym(h, "cs_option");
	cs.insn_new = (cs_insn *(*)(csh))dlsym(h, "cs_malloc");
	cs.disasm_iter = (bool (*)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *))
		dlsym(h, "cs_disasm_iter");
	cs.insn_free = (void (*)(cs_insn *, size_t))dlsym(h, "cs_free");
	cs.close = (cs_err (*)(csh *))dlsym(h, "cs_close");
	cs.ok = cs.open && cs.option && cs.insn_new && cs.disasm_iter && cs.insn_free && cs.close;
}

static bool capstone_ready(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, capstone_load_once);
	return cs.ok;
}

/* ---- the file -------------------------------------------------------------- */

static int cfile_open(struct cfile *f, const char *path, const struct lj_layout *lj,
		      char *err, size_t errsz)
{
	memset(f, 0, sizeof(*f));
	f->lj = lj;
	f->ef = elf_file__open(path);
	if (!f->ef) {
		snprintf(err, errsz, "not a readable ELF file");
		return -1;
	}
	if (read_fdes(f)) {
		snprintf(err, errsz, "no .eh_frame to find functions by");
		return -1;
	}
	if (!capstone_ready()) {
		snprintf(err, errsz, "cannot load the x86-64 decoder (%s)", CS_SONAME(CS_API_MAJOR));
		return -1;
	}
	if (cs.open(CS_ARCH_X86, CS_MODE_64, &f->cs) != CS_ERR_OK) {
		snprintf(err, errsz, "cannot open the capstone x86-64 decoder");
		return -1;
	}
	cs.option(f->cs, CS_OPT_DETAIL, CS_OPT_ON);
	f->ci = cs.insn_new(f->cs);
	if (!f->ci) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	return 0;
}

static void cfile_close(struct cfile *f)
{
	if (f->ci)
		cs.insn_free(f->ci, 1);
	if (f->cs)
		cs.close(&f->cs);
	elf_file__close(f->ef);
	free(f->fdes);
	free(f->fn.v);
}

static bool fde_start(struct cfile *f, __u64 addr)
{
	__u64 lo, hi;

	return !fde_range(f, addr, &lo, &hi) && lo == addr;
}

/* The bytes of [lo, hi), which must lie in one executable section. */
static const __u8 *code_bytes(struct cfile *f, __u64 lo, __u64 hi)
{
	__u64 s, e;
	const __u8 *p = elf_file__code_at(f->ef, lo, &s, &e);

	return p && hi <= e ? p + (lo - s) : NULL;
}

/* ---- one instruction ------------------------------------------------------- */

static int gpr(x86_reg r)
{
	switch (r) {
	case X86_REG_RAX: case X86_REG_EAX: case X86_REG_AX: case X86_REG_AL: case X86_REG_AH:
		return CODE_SITE_RAX;
	case X86_REG_RDX: case X86_REG_EDX: case X86_REG_DX: case X86_REG_DL: case X86_REG_DH:
		return CODE_SITE_RDX;
	case X86_REG_RCX: case X86_REG_ECX: case X86_REG_CX: case X86_REG_CL: case X86_REG_CH:
		return CODE_SITE_RCX;
	case X86_REG_RBX: case X86_REG_EBX: case X86_REG_BX: case X86_REG_BL: case X86_REG_BH:
		return CODE_SITE_RBX;
	case X86_REG_RSI: case X86_REG_ESI: case X86_REG_SI: case X86_REG_SIL:
		return CODE_SITE_RSI;
	case X86_REG_RDI: case X86_REG_EDI: case X86_REG_DI: case X86_REG_DIL:
		return CODE_SITE_RDI;
	case X86_REG_RBP: case X86_REG_EBP: case X86_REG_BP: case X86_REG_BPL:
		return CODE_SITE_RBP;
	case X86_REG_RSP: case X86_REG_ESP: case X86_REG_SP: case X86_REG_SPL:
		return CODE_SITE_RSP;
	case X86_REG_R8: case X86_REG_R8D: case X86_REG_R8W: case X86_REG_R8B: return CODE_SITE_R8;
	case X86_REG_R9: case X86_REG_R9D: case X86_REG_R9W: case X86_REG_R9B: return CODE_SITE_R9;
	case X86_REG_R10: case X86_REG_R10D: case X86_REG_R10W: case X86_REG_R10B: return CODE_SITE_R10;
	case X86_REG_R11: case X86_REG_R11D: case X86_REG_R11W: case X86_REG_R11B: return CODE_SITE_R11;
	case X86_REG_R12: case X86_REG_R12D: case X86_REG_R12W: case X86_REG_R12B: return CODE_SITE_R12;
	case X86_REG_R13: case X86_REG_R13D: case X86_REG_R13W: case X86_REG_R13B: return CODE_SITE_R13;
	case X86_REG_R14: case X86_REG_R14D: case X86_REG_R14W: case X86_REG_R14B: return CODE_SITE_R14;
	case X86_REG_R15: case X86_REG_R15D: case X86_REG_R15W: case X86_REG_R15B: return CODE_SITE_R15;
	case X86_REG_RIP:
		return RIP_REG;
	default:
		return NO_REG;
	}
}

static bool in_group(const cs_insn *ci, int group)
{
	for (int i = 0; i < ci->detail->groups_count; i++)
		if (ci->detail->groups[i] == group)
			return true;
	return false;
}

static void set_operands(struct ins *in, const cs_insn *ci)
{
	const cs_x86 *x = &ci->detail->x86;

	for (int k = 0; k < x->op_count && k < 2; k++) {
		const cs_x86_op *o = &x->operands[k];
		struct opnd *d = &in->op[k];

		d->type = o->type;
		d->size = o->size;
		d->reg = d->base = d->index = NO_REG;
		if (o->type == X86_OP_REG) {
			d->reg = gpr(o->reg);
		} else if (o->type == X86_OP_IMM) {
			d->v = o->imm;
		} else if (o->type == X86_OP_MEM) {
			d->base = gpr(o->mem.base);
			d->index = gpr(o->mem.index);
			d->v = o->mem.disp;
			/* A segment override (fs:, gs:) addresses something else. */
			if (o->mem.segment != X86_REG_INVALID)
				d->base = d->index = NO_REG, d->type = 0;
			if (d->base == RIP_REG)
				in->target = ci->address + ci->size + o->mem.disp;
		}
	}
}

/* Instructions that only read their register operands. */
static bool reads_only(unsigned int id)
{
	return id == X86_INS_CMP || id == X86_INS_TEST || id == X86_INS_BT || id == X86_INS_PUSH ||
	       id == X86_INS_CALL || id == X86_INS_JMP;
}

/* The GPRs an instruction writes: explicit operands and implicit ones. A
 * first register operand counts as written unless the instruction only
 * reads: too many writes can only make a match fail. */
static __u16 written_regs(const cs_insn *ci)
{
	const cs_x86 *x = &ci->detail->x86;
	__u16 w = 0;
	int r;

	if (x->op_count && x->operands[0].type == X86_OP_REG && !reads_only(ci->id) &&
	    !in_group(ci, CS_GRP_JUMP) && (r = gpr(x->operands[0].reg)) >= 0)
		w |= 1u << r;
	for (int k = 0; k < x->op_count; k++)
		if (x->operands[k].type == X86_OP_REG && (x->operands[k].access & CS_AC_WRITE) &&
		    (r = gpr(x->operands[k].reg)) >= 0)
			w |= 1u << r;
	for (int k = 0; k < ci->detail->regs_write_count; k++)
		if ((r = gpr(ci->detail->regs_write[k])) >= 0)
			w |= 1u << r;
	return w;
}

static void convert(struct ins *in, const cs_insn *ci)
{
	const __u64 zf = X86_EFLAGS_MODIFY_ZF | X86_EFLAGS_UNDEFINED_ZF | X86_EFLAGS_RESET_ZF |
			 X86_EFLAGS_SET_ZF;
	bool jump = in_group(ci, CS_GRP_JUMP);

	memset(in, 0, sizeof(*in));
	in->addr = ci->address;
	in->size = ci->size;
	in->id = ci->id;
	set_operands(in, ci);
	in->wregs = written_regs(ci);
	if (ci->detail->x86.eflags & zf)
		in->flags |= IN_ZF;
	if (in_group(ci, CS_GRP_CALL))
		in->flags |= IN_CALL;
	if (jump && ci->detail->x86.op_count == 1 && in->op[0].type == X86_OP_IMM) {
		in->flags |= IN_BRANCH | (ci->id == X86_INS_JMP ? 0 : IN_JCC);
		in->target = in->op[0].v;
	} else if (jump || in_group(ci, CS_GRP_RET) || in_group(ci, CS_GRP_INT) ||
		   in_group(ci, CS_GRP_IRET) || ci->id == X86_INS_UD2 || ci->id == X86_INS_HLT) {
		in->flags |= IN_STOP;
	}
	if ((in->flags & IN_CALL) && in->op[0].type == X86_OP_IMM)
		in->target = in->op[0].v;
}

/* Decode the one instruction at addr into in. 0, or -1 when it does not decode. */
static int decode_at(struct cfile *f, __u64 addr, struct ins *in)
{
	__u64 lo, hi;
	const __u8 *p = elf_file__code_at(f->ef, addr, &lo, &hi);
	uint64_t at = addr;
	size_t n;

	if (!p)
		return -1;
	p += addr - lo;
	n = hi - addr < 16 ? hi - addr : 16;
	if (!cs.disasm_iter(f->cs, &p, &n, &at, f->ci))
		return -1;
	convert(in, f->ci);
	return 0;
}

/* ---- one function ---------------------------------------------------------- */

static struct ins *push_ins(struct insns *s)
{
	if (ARRAY_ROOM(s->v, s->n, s->cap, 1024))
		return NULL;
	return &s->v[s->n++];
}

/* Index of the instruction at addr in s, or -1. */
static long find_ins(const struct insns *s, __u64 addr)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->v[mid].addr == addr)
			return mid;
		if (s->v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Decode [lo, hi) linearly into f->fn and mark jump targets. With lenient,
 * an undecodable byte is skipped (the interpreter blob holds alignment
 * padding); without, the function fails, as it does when one of its jumps
 * lands inside an instruction (linear decoding went astray): 0, or -1. */
static int decode_fn(struct cfile *f, __u64 lo, __u64 hi, bool lenient)
{
	const __u8 *p = code_bytes(f, lo, hi);
	size_t n = hi - lo;
	uint64_t addr = lo;

	f->fn.n = 0;
	if (!p)
		return -1;
	while (n) {
		struct ins *in;

		if (!cs.disasm_iter(f->cs, &p, &n, &addr, f->ci)) {
			if (!lenient)
				return -1;
			p++, n--, addr++;
			continue;
		}
		in = push_ins(&f->fn);
		if (!in)
			return -1;
		convert(in, f->ci);
	}
	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		long t;

		if (!(in->flags & IN_BRANCH) || in->target < lo || in->target >= hi)
			continue;
		t = find_ins(&f->fn, in->target);
		if (t >= 0)
			f->fn.v[t].flags |= IN_LABEL;
		else if (!lenient)
			return -1;
	}
	return 0;
}

/* Decode the function whose FDE starts at addr. 0, or -1. */
static int decode_fde(struct cfile *f, __u64 addr, __u64 *hi)
{
	__u64 lo;

	if (fde_range(f, addr, &lo, hi) || lo != addr)
		return -1;
	return decode_fn(f, lo, *hi, false);
}

/* ---- known register values ------------------------------------------------- */

static bool known(const struct regs *r, int reg, __s64 v)
{
	return reg >= 0 && (r->known >> reg & 1) && r->v[reg] == v;
}

/* The state after in. */
static void regs_step(struct regs *r, const struct ins *in)
{
	const struct opnd *d = &in->op[0], *s = &in->op[1];
	bool wide = d->type == X86_OP_REG && d->reg >= 0 && d->size >= 4;
	__s64 v = 0;
	bool set = false;

	if (in->flags & IN_LABEL)
		r->known = 0;
	if (wide && in->id == X86_INS_MOV && s->type == X86_OP_IMM) {
		v = d->size == 4 ? (__s64)(__u32)s->v : s->v, set = true;
	} else if (wide && in->id == X86_INS_MOV && s->type == X86_OP_REG && s->reg >= 0 &&
		   s->size == d->size && (r->known >> s->reg & 1)) {
		v = d->size == 4 ? (__s64)(__u32)r->v[s->reg] : r->v[s->reg], set = true;
	} else if (wide && (in->id == X86_INS_XOR || in->id == X86_INS_SUB) &&
		   s->type == X86_OP_REG && s->reg == d->reg) {
		set = true;
	} else if (wide && d->size == 8 && in->id == X86_INS_LEA && s->base == RIP_REG &&
		   s->index == NO_REG) {
		v = in->target, set = true;
	}
	r->known &= ~in->wregs;
	if (in->flags & IN_CALL)
		r->known &= ~CALLER_SAVED;
	if (set) {
		r->known |= 1u << d->reg;
		r->v[d->reg] = v;
	}
}

/* ---- the interpreter blob -------------------------------------------------- *
 * lua_cpcall calls lj_vm_cpcall, which lies inside the blob: the one FDE a
 * call enters other than at its start (buildvm gives the blob one FDE, up to
 * lj_vm_ffi_call). lua_pcall, lua_call and lua_resume must enter it too.
 */

/* The targets of direct calls and jumps of the function at fn that land
 * inside an FDE of the text but not at its start (at most max). */
static int calls_into_fde(struct cfile *f, __u64 fn, __u64 *out, int max)
{
	__u64 hi, lo2, hi2;
	int n = 0;

	if (decode_fde(f, fn, &hi))
		return -1;
	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		__u64 t = in->target;

		if (!(in->flags & (IN_CALL | IN_BRANCH)) || !t || (t >= fn && t < hi) ||
		    t < f->text_lo || t >= f->text_hi || fde_range(f, t, &lo2, &hi2) || lo2 == t)
			continue;
		if (n < max)
			out[n] = t;
		n++;
	}
	return n;
}

/* Does the exported function name enter the blob (when the file has it)? */
static int anchor_agrees(struct cfile *f, const char *name)
{
	__u64 a = elf_file__func(f->ef, name), t[8];
	int n;

	if (!a)
		return 0;
	n = calls_into_fde(f, a, t, 8);
	if (n <= 0 || n > 8)
		return -1;
	for (int i = 0; i < n; i++)
		if (t[i] <= f->vm_lo || t[i] >= f->vm_hi)
			return -1;
	return 1;
}

static int find_vm(struct cfile *f, char *err, size_t errsz)
{
	static const char *const others[] = { "lua_pcall", "lua_call", "lua_resume" };
	__u64 a = elf_file__func(f->ef, "lua_cpcall"), t[4];
	int n, agree = 0;

	if (!a) {
		snprintf(err, errsz, "no lua_cpcall in .dynsym or .symtab");
		return -1;
	}
	f->text = elf_file__code_at(f->ef, a, &f->text_lo, &f->text_hi);
	if (!f->text || !fde_start(f, a)) {
		snprintf(err, errsz, "lua_cpcall (0x%llx) starts no .eh_frame FDE", (unsigned long long)a);
		return -1;
	}
	n = calls_into_fde(f, a, t, 4);
	if (n != 1) {
		snprintf(err, errsz, "lua_cpcall makes %d calls into the middle of a function, not 1", n);
		return -1;
	}
	f->cpcall = t[0];
	fde_range(f, f->cpcall, &f->vm_lo, &f->vm_hi);
	for (int i = 0; i < 3; i++) {
		int r = anchor_agrees(f, others[i]);

		if (r < 0) {
			snprintf(err, errsz, "%s does not call into the interpreter found from lua_cpcall "
				 "(0x%llx-0x%llx)", others[i], (unsigned long long)f->vm_lo,
				 (unsigned long long)f->vm_hi);
			return -1;
		}
		agree += r;
	}
	if (!agree) {
		snprintf(err, errsz, "no lua_pcall, lua_call or lua_resume to confirm the interpreter");
		return -1;
	}
	return 0;
}

/* ---- walking the calls from the interpreter -------------------------------- *
 * trace_state is never called directly: lj_trace_ins hands it to
 * lj_vm_cpcall. lj_trace_ins is reached from the interpreter (lj_trace_hot,
 * lj_dispatch_ins: one or two calls deep, as inlining decides), and so is
 * the GC's atomic phase (lj_gc_step; lj_gc_fullgc from lua_gc). Following
 * direct calls BFS_DEPTH levels from there reads ~10% of a build's code.
 */

struct walk {
	__u64 funcs[BFS_MAX_FUNCS];	/* visited, by FDE start */
	int nfuncs;
	__u64 cands[64];		/* functions passed to lj_vm_cpcall */
	int ncands;
	__u64 gc;			/* lj_gc_separateudata candidate */
	bool gc_atomic;			/* called with (g, 0) */
};

static bool add_unique(__u64 *v, int *n, int max, __u64 x)
{
	for (int i = 0; i < *n; i++)
		if (v[i] == x)
			return false;
	if (*n == max)
		return false;
	v[(*n)++] = x;
	return true;
}

/* Note what the function decoded in f->fn ([lo, hi)) tells w: the
 * functions it takes the address of when it calls lj_vm_cpcall (the
 * protected function goes in rcx, often by way of a callee-saved register
 * across a loop, so any lea of a function start counts), calls of the GC
 * candidate with all = 0. Its callees go to next (when given). */
static void note_calls(struct cfile *f, __u64 lo, __u64 hi, struct walk *w, __u64 *next, int *nnext)
{
	struct regs r = { 0 };
	bool cpcalls = false;

	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		__u64 t = in->target;

		if (in->flags & IN_LABEL)
			r.known = 0;
		if ((in->flags & (IN_CALL | IN_BRANCH)) && t && (t < lo || t >= hi)) {
			cpcalls |= t == f->cpcall;
			if (w->gc && t == w->gc && (in->flags & IN_CALL) && known(&r, CODE_SITE_RSI, 0))
				w->gc_atomic = true;
			if (next && (t < f->vm_lo || t >= f->vm_hi) && t >= f->text_lo && t < f->text_hi)
				add_unique(next, nnext, BFS_MAX_FUNCS, t);
		}
		regs_step(&r, in);
	}
	for (size_t i = 0; cpcalls && i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		__u64 t = in->target;

		if (in->id == X86_INS_LEA && t && (t < lo || t >= hi) && (t < f->vm_lo || t >= f->vm_hi) &&
		    fde_start(f, t))
			add_unique(w->cands, &w->ncands, 64, t);
	}
}

/* Follow direct calls from roots, BFS_DEPTH levels deep. */
static void walk_calls(struct cfile *f, struct walk *w, const __u64 *roots, int nroots)
{
	__u64 (*level)[BFS_MAX_FUNCS] = calloc(2, sizeof(*level));
	int n = 0, cur = 0;

	if (!level)
		return;
	for (int i = 0; i < nroots; i++)
		add_unique(level[0], &n, BFS_MAX_FUNCS, roots[i]);
	for (int depth = 0; depth < BFS_DEPTH && n; depth++) {
		int nn = 0;

		for (int i = 0; i < n; i++) {
			__u64 a = level[cur][i], hi;

			if (!add_unique(w->funcs, &w->nfuncs, BFS_MAX_FUNCS, a) || decode_fde(f, a, &hi))
				continue;
			note_calls(f, a, hi, w, depth + 1 < BFS_DEPTH ? level[!cur] : NULL, &nn);
		}
		cur = !cur;
		n = nn;
	}
	free(level);
}

/* The direct callees of the interpreter blob outside it, plus the extra
 * root's (lua_gc's): where the walk starts. */
static int walk_roots(struct cfile *f, __u64 *roots, int max)
{
	int n = 0;
	__u64 gc = elf_file__func(f->ef, "lua_gc"), hi;

	if (decode_fn(f, f->vm_lo, f->vm_hi, true))
		return 0;
	for (size_t i = 0; i < f->fn.n; i++) {
		__u64 t = f->fn.v[i].target;

		if ((f->fn.v[i].flags & (IN_CALL | IN_BRANCH)) && t && (t < f->vm_lo || t >= f->vm_hi) &&
		    t >= f->text_lo && t < f->text_hi && fde_start(f, t))
			add_unique(roots, &n, max, t);
	}
	if (gc && !decode_fde(f, gc, &hi))
		for (size_t i = 0; i < f->fn.n; i++) {
			__u64 t = f->fn.v[i].target;

			if ((f->fn.v[i].flags & IN_CALL) && t && (t < gc || t >= hi) &&
			    t >= f->text_lo && t < f->text_hi && fde_start(f, t))
				add_unique(roots, &n, max, t);
		}
	return n;
}

/* ---- the GC cycle probe ---------------------------------------------------- *
 * lua_close calls lj_gc_separateudata(g, 1), and the GC's atomic phase
 * lj_gc_separateudata(g, 0) once per cycle. A compiler may inline the
 * latter and keep an out-of-line copy for lua_close alone (clang -O3 on
 * upstream does): a probe there would fire at close only, so the candidate
 * counts only when some call passes it 0.
 */

/* The one function lua_close calls with 1 in esi: 0 and a reason when none
 * or several. */
static __u64 gc_candidate(struct cfile *f, char *why, size_t whysz)
{
	__u64 a = elf_file__func(f->ef, "lua_close"), hi, found[8];
	struct regs r = { 0 };
	int n = 0;

	if (!a || decode_fde(f, a, &hi)) {
		snprintf(why, whysz, "not found: %s", a ? "lua_close does not decode" : "no lua_close export");
		return 0;
	}
	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];

		if ((in->flags & IN_LABEL))
			r.known = 0;
		if ((in->flags & IN_CALL) && in->target && (in->target < a || in->target >= hi) &&
		    known(&r, CODE_SITE_RSI, 1) && (in->target < f->vm_lo || in->target >= f->vm_hi) &&
		    fde_start(f, in->target))
			add_unique(found, &n, 8, in->target);
		regs_step(&r, in);
	}
	if (n != 1) {
		snprintf(why, whysz, n ? "not found: lua_close calls %d functions with (g, 1)" :
			 "not found: lua_close calls no function with (g, 1) (inlined?)", n);
		return 0;
	}
	return found[0];
}

/* ---- the trace-abort site -------------------------------------------------- *
 * trace_abort(): traceno = J->cur.traceno; if (traceno) { J->cur.link = 0;
 * J->cur.linktype = LJ_TRLINK_NONE; ... }. Accepted, J in any GPR but rsp:
 *   - the flags: movzx/movsx/mov of word [J + traceno] into r, then, within
 *     TEST_WINDOW instructions without a label, branch or call between and
 *     J's register untouched, test r,r or cmp r,0 of at least 16 bits (of r
 *     or of a 32/64-bit copy, or a new 16-bit extension, of it); or cmp word
 *     [J + traceno],0 / test word [J + traceno],0xffff;
 *   - then je/jne within JCC_WINDOW instructions, only moves, lea or nop
 *     between, no label;
 *   - its traceno != 0 side (jne's target, je's fall-through), followed
 *     through fall-throughs and up to PATH_JUMPS direct jmps for PATH_INSNS
 *     instructions before any call, return or write of J's register, stores
 *     0 (an immediate, or a register zeroed in that block) to word
 *     [J + link] and to byte [J + linktype].
 * No other read of traceno is followed by both stores. A compiler may copy
 * the test into each path that reaches it (gcc does, for the retry path):
 * all matches must then lie in one function, with J in one register.
 */

/* A 16-bit memory operand [base + J_cur_traceno], base a GPR: J->cur.traceno. */
static bool is_traceno(const struct opnd *o, const struct lj_layout *lj)
{
	return o->type == X86_OP_MEM && o->size == 2 && o->base >= 0 && o->base != CODE_SITE_RSP &&
	       o->index == NO_REG && o->v == lj->J_cur_traceno;
}

/* Does fn.v[i] compare a register of holders with 0 (test r,r / cmp r,0)? */
static bool tests_holder(const struct ins *in, __u16 holders, bool zext)
{
	const struct opnd *a = &in->op[0], *b = &in->op[1];

	if (a->type != X86_OP_REG || a->reg < 0 || !(holders >> a->reg & 1) || a->size < 2)
		return false;
	/* A plain 16-bit load leaves the register's upper bits as they were. */
	if (!zext && a->size != 2)
		return false;
	if (in->id == X86_INS_TEST)
		return b->type == X86_OP_REG && b->reg == a->reg && b->size == a->size;
	return in->id == X86_INS_CMP && b->type == X86_OP_IMM && b->v == 0;
}

static bool copies_holder(const struct ins *in, __u16 holders, bool zext)
{
	const struct opnd *d = &in->op[0], *s = &in->op[1];

	if (d->type != X86_OP_REG || d->reg < 0 || d->size < 4 || s->type != X86_OP_REG || s->reg < 0 ||
	    !(holders >> s->reg & 1))
		return false;
	if (in->id == X86_INS_MOV)
		return zext && s->size >= 4;
	return (in->id == X86_INS_MOVZX || in->id == X86_INS_MOVSX) && s->size == 2;
}

/* From a load of traceno at v[i] into a register: the index of the test of
 * that register (or a copy of it), or -1. */
static long load_then_test(const struct ins *v, size_t n, size_t i, int jreg)
{
	const struct ins *ld = &v[i];
	bool zext = ld->id == X86_INS_MOVZX || ld->id == X86_INS_MOVSX;
	__u16 holders;

	if ((!zext && ld->id != X86_INS_MOV) || ld->op[0].type != X86_OP_REG || ld->op[0].reg < 0 ||
	    ld->op[0].reg == jreg)
		return -1;
	holders = 1u << ld->op[0].reg;
	for (size_t k = i + 1; k < n && k <= i + TEST_WINDOW; k++) {
		const struct ins *in = &v[k];

		if (in->flags & (IN_LABEL | IN_BRANCH | IN_CALL | IN_STOP) || (in->wregs >> jreg & 1))
			return -1;
		if (tests_holder(in, holders, zext))
			return k;
		/* A copy holds traceno too: a 32/64-bit move of a zero-extended
		 * value, or a new extension of its low 16 bits (gcc -O1). */
		if (copies_holder(in, holders, zext)) {
			holders |= 1u << in->op[0].reg;
			zext = true;
			continue;
		}
		holders &= ~in->wregs;
		if (!holders)
			return -1;
	}
	return -1;
}

/* Between the test and its jcc: moves only, whatever the decoder says of
 * the flags. */
static bool keeps_flags(const struct ins *in)
{
	static const unsigned int ids[] = {
		X86_INS_MOV, X86_INS_MOVZX, X86_INS_MOVSX, X86_INS_MOVSXD, X86_INS_MOVABS,
		X86_INS_LEA, X86_INS_NOP,
	};

	if (in->flags & (IN_ZF | IN_BRANCH | IN_CALL | IN_STOP))
		return false;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (in->id == ids[i])
			return true;
	return false;
}

/* v[i] reads J->cur.traceno: the index of the je/jne that branches on it
 * (through a test of the loaded value, or a cmp/test of the memory), with
 * J's register in *jreg; -1 when v[i] does not start such a sequence. */
static long traceno_jcc(const struct ins *v, size_t n, size_t i, const struct lj_layout *lj, int *jreg)
{
	const struct ins *in = &v[i];
	long f = -1;

	if (is_traceno(&in->op[1], lj)) {
		*jreg = in->op[1].base;
		f = load_then_test(v, n, i, *jreg);
	} else if (is_traceno(&in->op[0], lj)) {
		*jreg = in->op[0].base;
		if ((in->id == X86_INS_CMP && in->op[1].type == X86_OP_IMM && in->op[1].v == 0) ||
		    (in->id == X86_INS_TEST && in->op[1].type == X86_OP_IMM && (in->op[1].v & 0xffff) == 0xffff))
			f = i;
	}
	if (f < 0)
		return -1;
	for (size_t m = f + 1; m < n && m <= (size_t)f + JCC_WINDOW; m++) {
		const struct ins *j = &v[m];

		if (j->flags & IN_LABEL)
			return -1;
		if (j->id == X86_INS_JE || j->id == X86_INS_JNE)
			return m;
		if (!keeps_flags(j) || (j->wregs >> *jreg & 1))
			return -1;
	}
	return -1;
}

/* Is in a store of 0 (immediate, or a register known to be 0) of size
 * bytes to [jreg + off]? */
static bool stores_zero(const struct ins *in, const struct regs *r, int jreg, __u32 off, int size)
{
	const struct opnd *d = &in->op[0], *s = &in->op[1];

	if (in->id != X86_INS_MOV || d->type != X86_OP_MEM || d->base != jreg || d->index != NO_REG ||
	    d->v != off || d->size != size)
		return false;
	return (s->type == X86_OP_IMM && s->v == 0) || (s->type == X86_OP_REG && known(r, s->reg, 0));
}

/* Does the path from addr (traceno != 0) store 0 to J->cur.link and
 * J->cur.linktype through jreg before any call, return or change of jreg?
 * Followed: fall-through, and direct jmps. */
static bool clears_link(struct cfile *f, __u64 addr, int jreg, struct regs r)
{
	const struct lj_layout *lj = f->lj;
	bool link = false, type = false;
	int jumps = 0;

	for (int k = 0; k < PATH_INSNS; k++) {
		struct ins in;

		if (decode_at(f, addr, &in))
			return false;
		link |= stores_zero(&in, &r, jreg, lj->J_cur_link, 2);
		type |= stores_zero(&in, &r, jreg, lj->J_cur_linktype, 1);
		if (link && type)
			return true;
		if ((in.flags & (IN_CALL | IN_STOP)) || (in.wregs >> jreg & 1))
			return false;
		regs_step(&r, &in);
		if ((in.flags & IN_BRANCH) && !(in.flags & IN_JCC)) {
			if (++jumps > PATH_JUMPS)
				return false;
			addr = in.target;
		} else {
			addr += in.size;
		}
	}
	return false;
}

struct match {
	__u64 jcc;
	int jreg;
};

/* The jcc at v[j] (flags from traceno, J in jreg, registers r before it):
 * does its traceno != 0 side clear the link? */
static bool abort_jcc(struct cfile *f, const struct ins *j, int jreg, const struct regs *r)
{
	__u64 nonzero = j->id == X86_INS_JNE ? j->target : j->addr + j->size;

	return clears_link(f, nonzero, jreg, *r);
}

/* Search the function decoded in f->fn for trace_abort's jcc; add to m. */
static void match_fn(struct cfile *f, struct match *m, int *nm)
{
	const struct ins *v = f->fn.v;
	size_t n = f->fn.n;
	struct regs r = { 0 }, at_jcc;

	for (size_t i = 0; i < n; i++) {
		int jreg;
		long j = traceno_jcc(v, n, i, f->lj, &jreg);

		if (j >= 0) {
			at_jcc = r;
			for (size_t k = i; k < (size_t)j; k++)
				regs_step(&at_jcc, &v[k]);
			if (abort_jcc(f, &v[j], jreg, &at_jcc)) {
				bool dup = false;

				for (int q = 0; q < *nm && q < MAX_MATCHES; q++)
					dup |= m[q].jcc == v[j].addr;
				if (!dup && *nm < MAX_MATCHES)
					m[*nm] = (struct match){ v[j].addr, jreg };
				*nm += !dup;
			}
		}
		regs_step(&r, &v[i]);
	}
}

/* Every function of the text: the trace-abort search (unless m is NULL),
 * and the calls of the GC candidate, everywhere. */
static void scan_all(struct cfile *f, struct walk *w, struct match *m, int *nm)
{
	for (size_t i = 0; i < f->nfdes; i++) {
		__u64 lo = f->fdes[i].lo, hi = f->fdes[i].hi;

		if (lo < f->text_lo || hi > f->text_hi || (lo >= f->vm_lo && lo < f->vm_hi) ||
		    decode_fn(f, lo, hi, false))
			continue;
		note_calls(f, lo, hi, w, NULL, NULL);
		if (m)
			match_fn(f, m, nm);
	}
}

/* Whether the file holds the JIT compiler: its parameter names (lj_jit.h
 * JIT_PARAMDEF, for jit.opt) are in .rodata only then. Used to word why no
 * site was found, never to find one. */
static bool has_jit_params(struct cfile *f)
{
	size_t n = 0;
	const char *p = elf_file__section(f->ef, ".rodata", &n);

	return p && memmem(p, n, "hotloop", 7) && memmem(p, n, "maxmcode", 8);
}

static int cmp_match(const void *a, const void *b)
{
	const struct match *x = a, *y = b;

	return x->jcc < y->jcc ? -1 : x->jcc > y->jcc;
}

/* All matches must be copies of one test: in one function, through one J
 * register. The first in address order is the site, the others its copies. */
static void set_abort(struct cfile *f, struct lj_code_sites *out, struct match *m, int nm)
{
	__u64 lo = 0, hi = 0, lo2, hi2;
	bool one = nm > 0 && nm <= CODE_SITES_MAX_COPIES && !fde_range(f, m[0].jcc, &lo, &hi);

	qsort(m, nm < MAX_MATCHES ? nm : MAX_MATCHES, sizeof(*m), cmp_match);
	for (int i = 1; one && i < nm; i++)
		one = !fde_range(f, m[i].jcc, &lo2, &hi2) && lo2 == lo && m[i].jreg == m[0].jreg;
	if (one) {
		out->abort_site = m[0].jcc;
		out->abort_j_reg = m[0].jreg;
		for (int i = 1; i < nm; i++)
			out->abort_more[out->abort_nmore++] = m[i].jcc;
		return;
	}
	if (nm)
		snprintf(out->abort_why, sizeof(out->abort_why), "not found: %d jccs on J->cur.traceno "
			 "clear J->cur.link, not in one function through one register", nm);
	else if (!has_jit_params(f))
		snprintf(out->abort_why, sizeof(out->abort_why), "not found: no JIT (the build has no JIT compiler)");
	else
		snprintf(out->abort_why, sizeof(out->abort_why),
			 "not found: no jcc on J->cur.traceno that clears J->cur.link in any function");
}

/* Search the functions handed to lj_vm_cpcall (trace_state), then their
 * callees (trace_abort kept apart); nothing: 0 matches. */
static int match_cands(struct cfile *f, const struct walk *w, struct match *m)
{
	__u64 next[256];
	int nm = 0, nnext = 0;

	for (int i = 0; i < w->ncands; i++) {
		__u64 hi;

		if (!decode_fde(f, w->cands[i], &hi))
			match_fn(f, m, &nm);
	}
	if (nm)
		return nm;
	for (int i = 0; i < w->ncands; i++) {
		__u64 hi;

		if (decode_fde(f, w->cands[i], &hi))
			continue;
		for (size_t k = 0; k < f->fn.n; k++)
			if ((f->fn.v[k].flags & IN_CALL) && f->fn.v[k].target)
				add_unique(next, &nnext, 256, f->fn.v[k].target);
	}
	for (int i = 0; i < nnext; i++) {
		__u64 hi;

		if ((next[i] < f->vm_lo || next[i] >= f->vm_hi) && !decode_fde(f, next[i], &hi))
			match_fn(f, m, &nm);
	}
	return nm;
}

static void find_sites(struct cfile *f, int flags, struct lj_code_sites *out)
{
	const struct lj_layout *lj = f->lj;
	bool offsets = lj->J_cur_traceno && lj->J_cur_link && lj->J_cur_linktype;
	bool chain = !(flags & CODE_SITES_FULL_SCAN);
	struct walk *w = calloc(1, sizeof(*w));
	struct match m[MAX_MATCHES];
	__u64 roots[512];
	int nm = 0;

	if (!w) {
		snprintf(out->gc_why, sizeof(out->gc_why), "out of memory");
		snprintf(out->abort_why, sizeof(out->abort_why), "out of memory");
		return;
	}
	w->gc = gc_candidate(f, out->gc_why, sizeof(out->gc_why));
	if (chain) {
		walk_calls(f, w, roots, walk_roots(f, roots, 512));
		nm = offsets ? match_cands(f, w, m) : 0;
	}
	/* A trace-abort site the calls from the interpreter do not show, all
	 * code may. The GC's atomic phase they do reach (lj_gc_step from the
	 * interpreter, lj_gc_fullgc from lua_gc): a call with (g, 0) they miss
	 * is not looked for elsewhere. */
	if (!chain || (offsets && !nm)) {
		w->gc_atomic = false;
		scan_all(f, w, offsets ? m : NULL, &nm);
	}
	if (offsets)
		set_abort(f, out, m, nm);
	else
		snprintf(out->abort_why, sizeof(out->abort_why),
			 "not looked for: the layout gives no J->cur traceno/link/linktype offsets");
	if (w->gc && w->gc_atomic)
		out->gc_cycle = w->gc;
	else if (w->gc)
		snprintf(out->gc_why, sizeof(out->gc_why), "not found: the callee of lua_close with (g, 1), "
			 "0x%llx, is never called with (g, 0) (inlined into the GC's atomic phase?)",
			 (unsigned long long)w->gc);
	free(w);
}

int code_sites__find_opts(const char *path, const struct lj_layout *lj, int flags,
			  struct lj_code_sites *out, char *err, size_t errsz)
{
	struct cfile f;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	out->abort_j_reg = -1;
	if (cfile_open(&f, path, lj, err, errsz))
		goto out;
	if (find_vm(&f, err, errsz))
		goto out;
	out->vm_lo = f.vm_lo;
	out->vm_hi = f.vm_hi;
	find_sites(&f, flags, out);
	ret = 0;
out:
	cfile_close(&f);
	return ret;
}

int code_sites__find(const char *path, const struct lj_layout *lj, struct lj_code_sites *out,
		     char *err, size_t errsz)
{
	return code_sites__find_opts(path, lj, 0, out, err, errsz);
}

/* ---- verification ---------------------------------------------------------- */

/* The jcc at index j of f->fn: is it the traceno jcc, by the rules above? */
static int verify_jcc(struct cfile *f, size_t j, char *err, size_t errsz)
{
	const struct ins *v = f->fn.v;
	struct regs r = { 0 }, at;

	if (!f->lj->J_cur_traceno || !f->lj->J_cur_link || !f->lj->J_cur_linktype) {
		snprintf(err, errsz, "the layout gives no J->cur traceno/link/linktype offsets");
		return -1;
	}
	if (v[j].id != X86_INS_JE && v[j].id != X86_INS_JNE) {
		snprintf(err, errsz, "0x%llx is not a je/jne", (unsigned long long)v[j].addr);
		return -1;
	}
	for (size_t i = 0; i < j; i++) {
		int jreg;

		if (i + TEST_WINDOW + JCC_WINDOW + 1 >= j && traceno_jcc(v, f->fn.n, i, f->lj, &jreg) == (long)j) {
			at = r;
			for (size_t k = i; k < j; k++)
				regs_step(&at, &v[k]);
			if (abort_jcc(f, &v[j], jreg, &at))
				return 0;
		}
		regs_step(&r, &v[i]);
	}
	snprintf(err, errsz, "the jcc at 0x%llx does not branch on J->cur.traceno to clear the link",
		 (unsigned long long)v[j].addr);
	return -1;
}

/* code_sites__verify is asked of one file again and again: for each site
 * when a build is identified, again before each probe, and so for every
 * process of a server. The file last verified stays open, its FDE table
 * read and its last function decoded, while it is the same file (device,
 * inode, size and modification time, from a stat of the path). */
static struct {
	pthread_mutex_t lock;
	struct cfile f;
	struct stat st;
	bool open;
	__u64 fn_lo, fn_hi;	/* f.fn holds [fn_lo, fn_hi) decoded; fn_hi 0: nothing */
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The kept file, opened afresh when path is another file; NULL with why. */
static struct cfile *kept_file(const char *path, const struct lj_layout *lj, char *err,
			       size_t errsz)
{
	struct stat st;

	if (stat(path, &st)) {
		snprintf(err, errsz, "cannot read it: %s", strerror(errno));
		return NULL;
	}
	if (!kept.open || !same_file(&st, &kept.st)) {
		if (kept.open)
			cfile_close(&kept.f);
		kept.open = false;
		kept.fn_hi = 0;
		if (cfile_open(&kept.f, path, lj, err, errsz)) {
			cfile_close(&kept.f);
			return NULL;
		}
		kept.open = true;
		kept.st = st;
	}
	kept.f.lj = lj;
	return &kept.f;
}

/* Sites verified in this process: the build cache's entry is verified when
 * it is read, and the same sites again just before they are probed. A
 * site holds for the file kept_file() keeps (by the same test that keeps
 * its decoded function), its kind and the layout it was verified with. */
static struct verified_site {
	struct stat st;
	__u64 vaddr;
	int kind;
	struct lj_layout lj;
} verified[8];
static unsigned nverified;

static bool verified_before(__u64 vaddr, int kind, const struct lj_layout *lj)
{
	for (unsigned i = 0; i < nverified && i < (sizeof(verified) / sizeof(verified[0])); i++) {
		const struct verified_site *v = &verified[i];

		if (v->vaddr == vaddr && v->kind == kind && same_file(&v->st, &kept.st) &&
		    !memcmp(&v->lj, lj, sizeof(*lj)))
			return true;
	}
	return false;
}

int code_sites__verify(const char *path, __u64 vaddr, int kind, const struct lj_layout *lj,
		       char *err, size_t errsz)
{
	struct cfile *f;
	__u64 lo, hi;
	long j;
	int ret = -1;

	pthread_mutex_lock(&kept.lock);
	if (!(f = kept_file(path, lj, err, errsz)))
		goto out;
	if (verified_before(vaddr, kind, lj)) {
		ret = 0;
		goto out;
	}
	if (fde_range(f, vaddr, &lo, &hi)) {
		snprintf(err, errsz, "0x%llx is in no .eh_frame FDE", (unsigned long long)vaddr);
		goto out;
	}
	if (kind == CODE_SITE_FUNC_ENTRY && lo != vaddr) {
		snprintf(err, errsz, "0x%llx is not a function entry (its FDE starts at 0x%llx)",
			 (unsigned long long)vaddr, (unsigned long long)lo);
		goto out;
	}
	if (kept.fn_lo != lo || kept.fn_hi != hi) {
		kept.fn_hi = 0;
		if (decode_fn(f, lo, hi, false)) {
			snprintf(err, errsz, "the function at 0x%llx does not decode",
				 (unsigned long long)lo);
			goto out;
		}
		kept.fn_lo = lo;
		kept.fn_hi = hi;
	}
	j = find_ins(&f->fn, vaddr);
	if (j < 0) {
		snprintf(err, errsz, "0x%llx is not an instruction boundary", (unsigned long long)vaddr);
		goto out;
	}
	if (kind == CODE_SITE_FUNC_ENTRY)
		ret = 0;
	else if (kind == CODE_SITE_TRACENO_JCC)
		ret = verify_jcc(f, j, err, errsz);
	else
		snprintf(err, errsz, "unknown code site kind %d", kind);
	if (!ret)
		verified[nverified++ % (sizeof(verified) / sizeof(verified[0]))] =
			(struct verified_site){ .st = kept.st, .vaddr = vaddr, .kind = kind, .lj = *lj };
out:
	pthread_mutex_unlock(&kept.lock);
	return ret;
}

/* ---- GC64 -------------------------------------------------------------------- *
 * A GC64 TValue is one 64-bit word: its type is the top 17 bits (itype(o) =
 * (int64_t)o->it64 >> 47) and a GC object's pointer the low 47 (gcval():
 * & LJ_GCVMASK). Without GC64 a TValue is a 32-bit payload and a 32-bit tag
 * at offset 4. The exported accessors below read a TValue each. A function
 * shows GC64 with a sar/shr of a 64-bit register by 47 or the immediate
 * 0x7fffffffffff; 32-bit tags without either and with a 4-byte access
 * (not lea, not nop) at [reg + 4], reg a GPR but rsp. A non-GC64 build's
 * light userdata mask (39 bits) and shift (by 39) are neither. The answer
 * needs two functions that agree and none that disagrees: lua_topointer,
 * a tail call to lj_obj_ptr in upstream's v2.1 and in gcc -O1/-Os builds,
 * often shows nothing.
 */

enum { TV_NONE, TV_GC64, TV_TAG32 };

static const char *const tvalue_readers[] = {
	"lua_type", "lua_touserdata", "lua_tothread", "lua_topointer",
};
#define NREADERS	(sizeof(tvalue_readers) / sizeof(tvalue_readers[0]))

/* What the function decoded in fn shows of the TValues it reads. */
static int tvalue_kind(const struct insns *fn)
{
	bool gc64 = false, tag32 = false;

	for (size_t i = 0; i < fn->n && !gc64; i++) {
		const struct ins *in = &fn->v[i];

		if ((in->id == X86_INS_SAR || in->id == X86_INS_SHR) && in->op[0].type == X86_OP_REG &&
		    in->op[0].size == 8 && in->op[1].type == X86_OP_IMM && in->op[1].v == 47)
			gc64 = true;
		for (int k = 0; k < 2; k++) {
			const struct opnd *o = &in->op[k];

			if (o->type == X86_OP_IMM && (__u64)o->v == LJ_GCVMASK)
				gc64 = true;
			else if (o->type == X86_OP_MEM && o->size == 4 && o->v == 4 && o->base >= 0 &&
				 o->base != CODE_SITE_RSP && in->id != X86_INS_LEA && in->id != X86_INS_NOP)
				tag32 = true;
		}
	}
	return gc64 ? TV_GC64 : tag32 ? TV_TAG32 : TV_NONE;
}

/* "a, b and c" from n names. */
static void join_names(char *buf, size_t sz, const char *const *v, int n)
{
	size_t len = 0;

	buf[0] = 0;
	for (int i = 0; i < n && len < sz; i++)
		len += snprintf(buf + len, sz - len, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", v[i]);
}

static int build_gc64(struct cfile *f, char *why, size_t whysz)
{
	const char *shows[3][NREADERS];
	char a[128], b[128];
	int n[3] = { 0 };

	for (size_t i = 0; i < NREADERS; i++) {
		__u64 fn = elf_file__func(f->ef, tvalue_readers[i]), hi;
		int k;

		if (!fn || decode_fde(f, fn, &hi))
			continue;
		k = tvalue_kind(&f->fn);
		shows[k][n[k]++] = tvalue_readers[i];
	}
	join_names(a, sizeof(a), shows[TV_GC64], n[TV_GC64]);
	join_names(b, sizeof(b), shows[TV_TAG32], n[TV_TAG32]);
	if (n[TV_GC64] >= 2 && !n[TV_TAG32]) {
		snprintf(why, whysz, "GC64: %s take types by a 47-bit shift or mask 47-bit pointers", a);
		return 1;
	}
	if (n[TV_TAG32] >= 2 && !n[TV_GC64]) {
		snprintf(why, whysz, "not GC64: %s read 32-bit type tags at offset 4", b);
		return 0;
	}
	if (n[TV_GC64] && n[TV_TAG32])
		snprintf(why, whysz, "cannot tell: %s read GC64 TValues, %s 32-bit tags", a, b);
	else
		snprintf(why, whysz, "cannot tell: %d of lua_type, lua_touserdata, lua_tothread and "
			 "lua_topointer show how they read TValues, 2 needed", n[TV_GC64] + n[TV_TAG32]);
	return -1;
}

int code_sites__gc64(const char *path, char *why, size_t whysz)
{
	struct cfile f;
	int ret = -1;

	if (!cfile_open(&f, path, NULL, why, whysz))
		ret = build_gc64(&f, why, whysz);
	cfile_close(&f);
	return ret;
}

/* ---- struct offsets in a function ------------------------------------------- */

static int cmp_s64(const void *a, const void *b)
{
	__s64 x = *(const __s64 *)a, y = *(const __s64 *)b;

	return x < y ? -1 : x > y;
}

/* The distinct displacements of the [reg + disp] operands of the function
 * whose FDE starts at addr, ascending, in *out (to free): how many, or -1.
 * reg is a GPR but rsp (a stack slot says nothing of a struct); a segment
 * override or no base register (an absolute address) does not count. Read
 * from all of capstone's operands: struct ins keeps two, VEX forms have
 * three. */
static long fn_disps(struct cfile *f, __u64 addr, __s64 **out)
{
	__u64 hi;
	const __u8 *p;
	uint64_t at = addr;
	size_t left;
	__s64 *v;
	long n = 0, u = 0;

	*out = NULL;
	/* decode_fde: every jump of the function lands on an instruction. */
	if (decode_fde(f, addr, &hi) || !(p = code_bytes(f, addr, hi)))
		return -1;
	v = malloc((8 * f->fn.n + 1) * sizeof(*v));
	if (!v)
		return -1;
	left = hi - addr;
	while (left && cs.disasm_iter(f->cs, &p, &left, &at, f->ci)) {
		const cs_x86 *x = &f->ci->detail->x86;

		for (int k = 0; k < x->op_count && k < 8; k++) {
			const cs_x86_op *o = &x->operands[k];
			int base = o->type == X86_OP_MEM ? gpr(o->mem.base) : NO_REG;

			if (base >= 0 && base != CODE_SITE_RSP && o->mem.segment == X86_REG_INVALID)
				v[n++] = o->mem.disp;
		}
	}
	qsort(v, n, sizeof(*v), cmp_s64);
	for (long i = 0; i < n; i++)
		if (!u || v[i] != v[u - 1])
			v[u++] = v[i];
	*out = v;
	return u;
}

int code_sites__offsets_used(const char *path, const char *func, __s64 *disps, int max)
{
	struct cfile f;
	char err[160];
	__s64 *v = NULL;
	__u64 a;
	long n = -1;

	if (!cfile_open(&f, path, NULL, err, sizeof(err)) && (a = elf_file__func(f.ef, func)))
		n = fn_disps(&f, a, &v);
	for (long i = 0; i < n && i < max; i++)
		disps[i] = v[i];
	free(v);
	cfile_close(&f);
	return n;
}

/* ---- the layout ---------------------------------------------------------------- *
 * A layout (bpf/lj_layout.h) fits unless the code shows otherwise:
 *   - the build is GC64 (above); a non-GC64 build fits no layout;
 *   - GG_DISP2G: the interpreter (buildvm's code, the same whatever compiler
 *     built the rest) keeps DISPATCH in r14 and stores the vmstate with
 *     mov dword [DISPATCH + disp2g + g_vmstate], ~LJ_VMST_x (set_vmstate).
 *     All its stores of an immediate LJ_VMST_INTERP..LJ_VMST_ASM through r14
 *     must have one displacement, with INTERP and C among them; it must be
 *     the layout's disp2g + g_vmstate. This ties sizeof(global_State),
 *     sizeof(jit_State) and the hot counters together, JIT or not;
 *   - J from g: luaJIT_setmode begins with lj_trace_abort(g)
 *     (G2J(g)->state &= ~LJ_TRACE_ACTIVE) and, for LUAJIT_MODE_ENGINE,
 *     changes G2J(g)->flags, both through the register holding g: with
 *     g2j = gg_j - gg_g, its displacements hold g2j + J_state and g2j +
 *     J_flags. Both were there in every build checked (gcc -O1, -O2, -O3,
 *     -Os, -fno-omit-frame-pointer, clang -O2, -Os, -O3; luajit, luajit2,
 *     upstream), where other displacements of J (g2j itself for G2J(g),
 *     J->trace) come and go with inlining. A compiler could also take
 *     J = g + g2j first and J_state, J_flags from it: g2j, J_state and
 *     J_flags all there count too (no build checked does that). What else
 *     the function addresses (g's hookmask, wrapf and bc_cfunc_ext,
 *     lua_State, GCfunc, GCproto, frame slots) lies below sizeof(global_State)
 *     = g2j: a displacement past g2j reaches into J. So when one does and
 *     neither form is there, the layout is wrong; when none does (no JIT
 *     compiler: no lj_trace_abort, no engine mode), nothing is checked, nor
 *     is it for a layout without J (gg_j 0).
 * g's own fields are the same in every tree checked (lua_gc's g->gc,
 * lua_sethook's g->hookmask): they tell no layout from another.
 */

/* The displacement d of the interpreter's vmstate stores (the blob decoded
 * leniently): 0, or -1 with the reason. */
static int vmstate_disp(struct cfile *f, __s64 *d, char *why, size_t whysz)
{
	bool interp = false, c = false;
	int n = 0;

	if (decode_fn(f, f->vm_lo, f->vm_hi, true)) {
		snprintf(why, whysz, "the interpreter does not decode");
		return -1;
	}
	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		const struct opnd *m = &in->op[0], *s = &in->op[1];
		__s32 st;

		if (in->id != X86_INS_MOV || m->type != X86_OP_MEM || m->size != 4 || m->base != CODE_SITE_R14 ||
		    m->index != NO_REG || s->type != X86_OP_IMM)
			continue;
		st = (__s32)s->v;
		if (st > LJ_VMST_INTERP || st < LJ_VMST_ASM)
			continue;
		if (n++ && m->v != *d) {
			snprintf(why, whysz, "the interpreter stores LJ_VMST_* values at [r14%+lld] and [r14%+lld]",
				 (long long)*d, (long long)m->v);
			return -1;
		}
		*d = m->v;
		interp |= st == LJ_VMST_INTERP;
		c |= st == LJ_VMST_C;
	}
	if (!interp || !c) {
		snprintf(why, whysz, "the interpreter stores no LJ_VMST_INTERP and LJ_VMST_C through r14");
		return -1;
	}
	return 0;
}

/* luaJIT_setmode against the layout's J: 1 fits, 0 wrong, -1 nothing to
 * check; why says what was seen. */
static int j_from_g(struct cfile *f, const struct lj_layout *lj, char *why, size_t whysz)
{
	__s64 g2j = (__s64)lj->gg_j - lj->gg_g, st = g2j + lj->J_state, fl = g2j + lj->J_flags, *v;
	__u64 a = elf_file__func(f->ef, "luaJIT_setmode");
	bool has_st = false, has_fl = false, has_j = false, has_jst = false, has_jfl = false;
	char past[96] = "";
	size_t len = 0;
	int npast = 0;
	long n;

	if (!lj->gg_j || g2j <= 0) {
		snprintf(why, whysz, "no jit_State in the layout");
		return -1;
	}
	if (!a || (n = fn_disps(f, a, &v)) < 0) {
		snprintf(why, whysz, a ? "luaJIT_setmode does not decode" : "no luaJIT_setmode export");
		return -1;
	}
	for (long i = 0; i < n; i++) {
		has_st |= v[i] == st;
		has_fl |= v[i] == fl;
		has_j |= v[i] == g2j;
		has_jst |= v[i] == lj->J_state;
		has_jfl |= v[i] == lj->J_flags;
		if (v[i] > g2j && npast++ < 4 && len < sizeof(past))
			len += snprintf(past + len, sizeof(past) - len, "%s%lld", npast > 1 ? "," : "",
					(long long)v[i]);
	}
	free(v);
	if (has_st && has_fl) {
		snprintf(why, whysz, "luaJIT_setmode reaches J->state at g+%lld and J->flags at g+%lld",
			 (long long)st, (long long)fl);
		return 1;
	}
	if (has_j && has_jst && has_jfl) {
		snprintf(why, whysz, "luaJIT_setmode takes J at g+%lld, J->state at +%u, J->flags at +%u",
			 (long long)g2j, lj->J_state, lj->J_flags);
		return 1;
	}
	if (!npast) {
		snprintf(why, whysz, "luaJIT_setmode reaches nothing past g+%lld (no JIT compiler?)",
			 (long long)g2j);
		return -1;
	}
	snprintf(why, whysz, "luaJIT_setmode reaches g+%s%s, not J->state at g+%lld and J->flags at g+%lld",
		 past, npast > 4 ? ",..." : "", (long long)st, (long long)fl);
	return 0;
}

static bool check_layout(struct cfile *f, const struct lj_layout *lj, char *why, size_t whysz)
{
	char gw[160], vw[192] = "", jw[160], verr[128];
	__s64 d = 0, want = (__s64)lj->disp2g + lj->g_vmstate;
	int gc64 = build_gc64(f, gw, sizeof(gw)), vm = -1, j;

	if (!gc64) {
		snprintf(why, whysz, "%s; layouts are GC64", gw);
		return false;
	}
	if (!lj->disp2g || !lj->g_vmstate)
		snprintf(vw, sizeof(vw), "the layout gives no disp2g/g_vmstate");
	else if (find_vm(f, verr, sizeof(verr)))
		snprintf(vw, sizeof(vw), "no interpreter: %s", verr);
	else if (!(vm = vmstate_disp(f, &d, vw, sizeof(vw))) && d != want) {
		snprintf(why, whysz, "the interpreter stores the vmstate at DISPATCH%+lld, the layout "
			 "puts it at DISPATCH%+lld (disp2g %d + g_vmstate %u)", (long long)d,
			 (long long)want, lj->disp2g, lj->g_vmstate);
		return false;
	}
	j = j_from_g(f, lj, jw, sizeof(jw));
	if (!j) {
		snprintf(why, whysz, "%s", jw);
		return false;
	}
	if (!vm)
		snprintf(vw, sizeof(vw), "vmstate at DISPATCH%+lld", (long long)d);
	snprintf(why, whysz, "fits: %s; %s; %s", gc64 > 0 ? "GC64" : "GC64 unknown", vw, jw);
	return true;
}

bool code_sites__layout_check(const char *path, const struct lj_layout *lj, char *why, size_t whysz)
{
	struct cfile f;
	char err[160];
	bool ret = true;

	if (cfile_open(&f, path, lj, err, sizeof(err)))
		snprintf(why, whysz, "not checked: %s", err);
	else
		ret = check_layout(&f, lj, why, whysz);
	cfile_close(&f);
	return ret;
}

bool code_sites__layout_fits(const char *path, const struct lj_layout *lj)
{
	return code_sites__layout_check(path, lj, NULL, 0);
}

const char *code_sites__reg_name(int reg)
{
	static const char *const names[] = {
		"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
	};

	return reg >= 0 && reg < 16 ? names[reg] : "?";
}
