/* SPDX-License-Identifier: MIT */
/*
 * x86_code.h - the machine code of a LuaJIT file, as the code readers of
 * luajit/ see it (code_sites.c, code_layout.c): its functions' bounds from
 * .eh_frame, its instructions decoded with capstone into the few facts the
 * matchers need, the registers whose values a straight run of them makes
 * known, and where the interpreter lies. Internal to luajit/.
 */
#ifndef NUPP_X86_CODE_H
#define NUPP_X86_CODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include <capstone/capstone.h>
#include "lj_layout.h"

/* Registers by their DWARF number (x86-64 System V psABI): code_sites.h's abort_j_reg. */
enum code_site_reg {
	CODE_SITE_RAX, CODE_SITE_RDX, CODE_SITE_RCX, CODE_SITE_RBX,
	CODE_SITE_RSI, CODE_SITE_RDI, CODE_SITE_RBP, CODE_SITE_RSP,
	CODE_SITE_R8, CODE_SITE_R9, CODE_SITE_R10, CODE_SITE_R11,
	CODE_SITE_R12, CODE_SITE_R13, CODE_SITE_R14, CODE_SITE_R15,
};


#define NO_REG		(-1)
#define RIP_REG		(-2)
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

void cfile__close(struct cfile *f);
const __u8 *cfile__code_bytes(struct cfile *f, __u64 lo, __u64 hi);
int cfile__decode_at(struct cfile *f, __u64 addr, struct ins *in);
int cfile__decode_fde(struct cfile *f, __u64 addr, __u64 *hi);
int cfile__decode_fn(struct cfile *f, __u64 lo, __u64 hi, bool lenient);
bool cfile__disasm(struct cfile *f, const uint8_t **p, size_t *left, uint64_t *at);
int cfile__fde_range(struct cfile *f, __u64 addr, __u64 *lo, __u64 *hi);
bool cfile__fde_start(struct cfile *f, __u64 addr);
int cfile__find_vm(struct cfile *f, char *err, size_t errsz);
int cfile__open(struct cfile *f, const char *path, const struct lj_layout *lj,
		      char *err, size_t errsz);
long insns__find(const struct insns *s, __u64 addr);
bool regs__known(const struct regs *r, int reg, __s64 v);
void regs__step(struct regs *r, const struct ins *in);
int x86__gpr(x86_reg r);

#endif /* NUPP_X86_CODE_H */
