/* SPDX-License-Identifier: MIT */
/*
 * bcdump.h - LuaJIT bytecode dumps (string.dump, luajit -b) read back into
 * prototypes: what `nupp-bpf check` analyses.
 *
 * The format is lj_bcdump.h's (version 2, LuaJIT 2.1): a header, then the
 * prototypes, children before their parent, each with its bytecode (the
 * function header instruction left out), upvalue references, constants
 * and, unless stripped, line numbers and upvalue names. A dump is written
 * by the LuaJIT build that will run the code, so its opcodes are that
 * build's: their names come from the build's jit.vmdef (lj_build.h).
 */
#ifndef NUPP_BCDUMP_H
#define NUPP_BCDUMP_H

#include <stddef.h>
#include <linux/types.h>

/* lj_obj.h PROTO_* flags and upvalue reference bits. */
#define BC_PROTO_VARARG		0x02
#define BC_UV_LOCAL		0x8000	/* the parent's slot, not its upvalue */
#define BC_UV_IMMUTABLE		0x4000	/* never assigned after its definition */

/* A GC constant, as the bytecode's D operand names it (bc_proto.kgc). */
enum bc_kgc_type { BC_KGC_CHILD, BC_KGC_TAB, BC_KGC_I64, BC_KGC_U64, BC_KGC_COMPLEX, BC_KGC_STR };

struct bc_kgc {
	enum bc_kgc_type type;
	const char *str;	/* BC_KGC_STR: its bytes, NUL-terminated */
	__u32 len;
	int child;		/* BC_KGC_CHILD: index of the prototype in the chunk */
};

struct bc_proto {
	__u8 flags, numparams, framesize;
	int nins;
	__u32 *ins;		/* ins[i] is the instruction at pc i+1 */
	int *line;		/* its line (the first line when stripped) */
	int firstline, numline;
	int nuv;
	__u16 *uv;		/* upvalue references */
	char **uvname;		/* "" when stripped */
	int nkgc;
	struct bc_kgc *kgc;	/* operand d names kgc[nkgc - 1 - d] */
	int parent;		/* index of the parent prototype, -1 for the main chunk */
};

struct bc_chunk {
	char *name;		/* the chunk name ("@file.lua", "=stdin", source text) */
	int nprotos;
	struct bc_proto *protos;	/* children first: the main chunk is the last */
	int fr2;		/* LJ_FR2: a call's arguments start at A+2 */
	char *strings;		/* the block the kgc strings and upvalue names live in */
};

/* Read a dump of len bytes. 0, or -1 with a one-line reason in err. */
int bcdump__parse(const void *data, size_t len, struct bc_chunk *c, char *err, size_t errsz);
void bcdump__free(struct bc_chunk *c);

/* Instruction fields (lj_bc.h). */
static inline int bc_op(__u32 i) { return i & 0xff; }
static inline int bc_a(__u32 i) { return (i >> 8) & 0xff; }
static inline int bc_b(__u32 i) { return i >> 24; }
static inline int bc_c(__u32 i) { return (i >> 16) & 0xff; }
static inline int bc_d(__u32 i) { return i >> 16; }
static inline int bc_j(__u32 i) { return (int)bc_d(i) - 0x8000; }

#endif
