/* SPDX-License-Identifier: MIT */
/*
 * bcpath.h - the bytecodes a stretch of a trace's machine code ran.
 *
 * The code between two snapshots of a trace (i and i + 1) was recorded from
 * the bytecodes the interpreter would have run between their PCs: on from
 * snapshot i's PC in its innermost frame, out of frames snapshot i + 1 no
 * longer has (to their returns), along the frame both share, and into the
 * frames snapshot i + 1 adds (from their first instruction to their call
 * or to its PC). LuaJIT keeps no map from machine code to bytecode; the
 * assembler lays the IR out in recording order (lj_asm.c assembles it
 * backwards, into ascending addresses), so a position p of the way through
 * the stretch's code is placed p of the way along that path, each bytecode
 * weighted by the work it records (a MOV, a constant load, a jump, a call
 * or a return of an inlined function records no machine code of its own).
 * A call on the way whose callee no snapshot shows (inlined whole, with no
 * guard inside) is followed into the callee when the caller can say which
 * function it ran.
 *
 * Pure logic over bytecode the caller reads (tests/unit/test_bcpath.c).
 */
#ifndef NUPP_BCPATH_H
#define NUPP_BCPATH_H

#include <linux/types.h>

/* What an opcode does to the path (by its name in a build's bcnames). */
enum bcpath_kind {
	BCK_WORK,	/* records work in place */
	BCK_FREE,	/* records no code of its own */
	BCK_TEST,	/* a comparison or test: the JMP after it is conditional */
	BCK_JMP,	/* JMP: D is the target */
	BCK_BACK,	/* FORL, IFORL, ITERL, IITERL: back to D while looping */
	BCK_JBACK,	/* JFORL, JITERL: back to the loop's start (D names a trace) */
	BCK_RET,	/* RET*: out of the frame */
	BCK_CALL,	/* CALL, CALLM: into a Lua function, or a builtin */
	BCK_FORI,	/* FORI, JFORI: past the loop when it does not run */
};

struct bcpath_ops {
	__u8 kind[256];	/* enum bcpath_kind, by opcode */
	int uget;	/* UGET's opcode, -1 */
};

/* The kinds of a build's opcodes, from its bytecode names. */
void bcpath_ops_init(struct bcpath_ops *ops, const char *const *names, int n);

/* One frame of a snapshot, outermost (the trace's base frame) first: its
 * function (struct nupp_frame.fn; 0 for the base frame as it is in memory)
 * and its pc as struct nupp_frame.pc holds it (after the instruction, with
 * the call kind in the low bits). */
struct bcpath_level {
	__u64 fn;
	__u64 pc;
	__u64 closure;	/* its GCfunc when the trace holds it as a constant, else 0 */
};

/* A function's bytecode: bc[0 .. n) at address addr (bc[0] its FUNC*). */
struct bcpath_code {
	const __u32 *bc;
	__u32 n;
	__u64 addr;
};

/* What the caller reads of the process: the bytecode of function fn, or
 * when fn is 0 of the function whose bytecode holds the instruction before
 * pc (0 or -1); and the function a CALL ran whose frame no snapshot shows
 * on the way (a callee inlined whole between two snapshots), as a level
 * into *callee (fn and closure; 0 or -1 when not known). ret is the address
 * after the CALL, caller the frame it is in, uv the upvalue the call's
 * function was loaded from (UGET), -1 when it was not. */
struct bcpath_reader {
	int (*code)(void *ctx, __u64 fn, __u64 pc, struct bcpath_code *code);
	int (*callee)(void *ctx, const struct bcpath_level *caller, __u64 ret, int uv,
		      struct bcpath_level *callee);
	void *ctx;
};

/* A bytecode of the path: the frames it runs in are levels[lv .. lv + nlv),
 * the last one at pc (after the instruction); cum is the weight of the
 * path up to and with it. */
struct bcpath_step {
	__u64 pc;
	__u32 cum;
	__u16 lv;
	__u8 nlv;
};

struct bcpath {
	struct bcpath_level *levels;
	struct bcpath_step *steps;
	int nlevels, nsteps, caplevels;
	__u32 total;		/* the last step's cum */
};

/* The path from snapshot frames a[0..na) to b[0..nb), into *p. 0; -1 when
 * the bytecode does not lead from one to the other (p is then empty);
 * -ENOMEM. */
int bcpath_build(struct bcpath *p, const struct bcpath_ops *ops,
		 const struct bcpath_level *a, int na, const struct bcpath_level *b, int nb,
		 const struct bcpath_reader *rd);

/* The step at position num / den (0 <= num < den) of the way along p. */
const struct bcpath_step *bcpath_at(const struct bcpath *p, __u64 num, __u64 den);

void bcpath_free(struct bcpath *p);

#endif /* NUPP_BCPATH_H */
