// SPDX-License-Identifier: MIT
/*
 * x86_code.c - the machine code of a LuaJIT file (x86_code.h): .eh_frame's
 * function bounds, capstone (loaded at first use), instructions decoded
 * into struct ins, known register values, and the interpreter blob.
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
#include "x86_code.h"
#include "x86_lengths.h"
#include "elf_file.h"
#include "base/util.h"

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
int cfile__fde_range(struct cfile *f, __u64 addr, __u64 *lo, __u64 *hi)
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

int cfile__open(struct cfile *f, const char *path, const struct lj_layout *lj,
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

void cfile__close(struct cfile *f)
{
	if (f->ci)
		cs.insn_free(f->ci, 1);
	if (f->cs)
		cs.close(&f->cs);
	elf_file__close(f->ef);
	free(f->fdes);
	free(f->fn.v);
}

bool cfile__fde_start(struct cfile *f, __u64 addr)
{
	__u64 lo, hi;

	return !cfile__fde_range(f, addr, &lo, &hi) && lo == addr;
}

/* The bytes of [lo, hi), which must lie in one executable section. */
const __u8 *cfile__code_bytes(struct cfile *f, __u64 lo, __u64 hi)
{
	__u64 s, e;
	const __u8 *p = elf_file__code_at(f->ef, lo, &s, &e);

	return p && hi <= e ? p + (lo - s) : NULL;
}

/* ---- one instruction ------------------------------------------------------- */

int x86__gpr(x86_reg r)
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
			d->reg = x86__gpr(o->reg);
		} else if (o->type == X86_OP_IMM) {
			d->v = o->imm;
		} else if (o->type == X86_OP_MEM) {
			d->base = x86__gpr(o->mem.base);
			d->index = x86__gpr(o->mem.index);
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
	    !in_group(ci, CS_GRP_JUMP) && (r = x86__gpr(x->operands[0].reg)) >= 0)
		w |= 1u << r;
	for (int k = 0; k < x->op_count; k++)
		if (x->operands[k].type == X86_OP_REG && (x->operands[k].access & CS_AC_WRITE) &&
		    (r = x86__gpr(x->operands[k].reg)) >= 0)
			w |= 1u << r;
	for (int k = 0; k < ci->detail->regs_write_count; k++)
		if ((r = x86__gpr(ci->detail->regs_write[k])) >= 0)
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
int cfile__decode_at(struct cfile *f, __u64 addr, struct ins *in)
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
long insns__find(const struct insns *s, __u64 addr)
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
int cfile__decode_fn(struct cfile *f, __u64 lo, __u64 hi, bool lenient)
{
	const __u8 *p = cfile__code_bytes(f, lo, hi);
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
		t = insns__find(&f->fn, in->target);
		if (t >= 0)
			f->fn.v[t].flags |= IN_LABEL;
		else if (!lenient)
			return -1;
	}
	return 0;
}

/* Decode the function whose FDE starts at addr. 0, or -1. */
int cfile__decode_fde(struct cfile *f, __u64 addr, __u64 *hi)
{
	__u64 lo;

	if (cfile__fde_range(f, addr, &lo, hi) || lo != addr)
		return -1;
	return cfile__decode_fn(f, lo, *hi, false);
}

/* ---- known register values ------------------------------------------------- */

bool regs__known(const struct regs *r, int reg, __s64 v)
{
	return reg >= 0 && (r->known >> reg & 1) && r->v[reg] == v;
}

/* The state after in. */
void regs__step(struct regs *r, const struct ins *in)
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

	if (cfile__decode_fde(f, fn, &hi))
		return -1;
	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		__u64 t = in->target;

		if (!(in->flags & (IN_CALL | IN_BRANCH)) || !t || (t >= fn && t < hi) ||
		    t < f->text_lo || t >= f->text_hi || cfile__fde_range(f, t, &lo2, &hi2) || lo2 == t)
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

int cfile__find_vm(struct cfile *f, char *err, size_t errsz)
{
	static const char *const others[] = { "lua_pcall", "lua_call", "lua_resume" };
	__u64 a = elf_file__func(f->ef, "lua_cpcall"), t[4];
	int n, agree = 0;

	if (!a) {
		snprintf(err, errsz, "no lua_cpcall in .dynsym or .symtab");
		return -1;
	}
	f->text = elf_file__code_at(f->ef, a, &f->text_lo, &f->text_hi);
	if (!f->text || !cfile__fde_start(f, a)) {
		snprintf(err, errsz, "lua_cpcall (0x%llx) starts no .eh_frame FDE", (unsigned long long)a);
		return -1;
	}
	n = calls_into_fde(f, a, t, 4);
	if (n != 1) {
		snprintf(err, errsz, "lua_cpcall makes %d calls into the middle of a function, not 1", n);
		return -1;
	}
	f->cpcall = t[0];
	cfile__fde_range(f, f->cpcall, &f->vm_lo, &f->vm_hi);
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

bool cfile__disasm(struct cfile *f, const uint8_t **p, size_t *left, uint64_t *at)
{
	return cs.disasm_iter(f->cs, p, left, at, f->ci);
}

/* ---- lengths, for code read from a process --------------------------------- */

int x86_straight_lengths(const __u8 *code, size_t len, __u64 addr, __u8 *lens, int max)
{
	uint64_t at = addr;
	csh h;
	cs_insn *in;
	int n = 0;

	/* A handle of its own (no detail): callers are rare (a sample in a
	 * trace's head) and may run on any thread. */
	if (!capstone_ready() || cs.open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return -1;
	if ((in = cs.insn_new(h))) {
		while (n < max && cs.disasm_iter(h, &code, &len, &at, in)) {
			lens[n++] = (__u8)in->size;
			if (!strcmp(in->mnemonic, "jmp") || !strncmp(in->mnemonic, "call", 4) ||
			    !strncmp(in->mnemonic, "ret", 3))
				break;
		}
		cs.insn_free(in, 1);
	}
	cs.close(&h);
	return n;
}
