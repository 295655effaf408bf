/* SPDX-License-Identifier: MIT */
/*
 * tracemap.h - compiled samples mapped through their trace's snapshots.
 *
 * On trace, the sampler walks the frames that exist in memory: the trace's
 * base frame (g->jit_base) and those below it. The frames LuaJIT inlined
 * into the trace exist only in its snapshots, which say, for each stretch of
 * the trace's machine code, what the interpreter's stack and PC would be if
 * the trace exited there (lj_snap_restore). The sampler records the trace
 * number and the interrupted instruction (NUPP_PC_TRACE in bpf/sampler_abi.h);
 * this maps that position to the last snapshot whose code starts at or
 * before it (snap[i].mcofs, as lj_trace_unwind does), and rebuilds from the
 * snapshot's entries the frames an exit there would restore: their functions
 * (IR constants in the func slots), their links (IR constants in the frame
 * slots) and the snapshot's PC. Between that snapshot and the next, the
 * position is then placed on the bytecode the trace recorded there
 * (bcpath.h): the frames and PC of that bytecode.
 *
 * What is read of a trace is kept by its VM and its number (each VM
 * numbers its own traces from 1) and checked against
 * J->trace[n] and the trace's header at each poll that uses it: a trace
 * flushed, or its number reused, is read again, and a sample whose address
 * does not lie in the code of the trace of its number is left unmapped,
 * never mapped through another.
 */
#ifndef NUPP_TRACEMAP_H
#define NUPP_TRACEMAP_H

#include <stddef.h>
#include <linux/types.h>
#include "luajit/lj_build.h"
#include "base/procmem.h"
#include "sampler_abi.h"

/* How a recorded stack fared (tracemap__expand). */
enum tracemap_result {
	TRACEMAP_NONE,		/* not a compiled sample with a position: unchanged */
	TRACEMAP_MAPPED,	/* mapped through a snapshot */
	TRACEMAP_UNMAPPED,	/* a position, but not mappable: in code the trace
				 * called, with no return into it found */
	TRACEMAP_IN_VM,		/* in the interpreter's code, leaving the trace
				 * (the exit handler before it sets vmstate EXIT,
				 * ->vm_exit_interp before INTERP): unchanged */
	TRACEMAP_GONE,		/* a position in a trace no longer there to read
				 * (flushed, or freed by lua_close at the exit) */
};

struct tracemap;

/* A mapper for one process running build b, whose interpreter lies in
 * [vm_lo, vm_hi) (nupp_proc's); NULL on ENOMEM or when b's layout has no trace
 * fields (tr_size 0: a revision without SnapShot.mcofs). mem is copied. */
struct tracemap *tracemap__new(const struct lj_build *b, struct mem_reader mem, __u64 vm_lo,
			       __u64 vm_hi);
void tracemap__free(struct tracemap *tm);

/* Drop what was read of every trace. */
void tracemap__flush(struct tracemap *tm);

/* A new poll's stacks follow: each trace they name is checked again
 * against the process, once. */
void tracemap__poll(struct tracemap *tm);

/* The stack in[0..depth) recorded in VM g, innermost first, with the frames
 * inlined into the trace before its leaf, into out (room for max frames; at
 * most depth + NUPP_MAX_DEPTH are written): *n frames. The leaf becomes the
 * trace's base frame with its pc, or keeps only its call kind when the
 * position does not map. An enum tracemap_result, or -ENOMEM. */
int tracemap__expand(struct tracemap *tm, __u64 g, const struct nupp_frame *in, int depth,
		     struct nupp_frame *out, int max, int *n);

/* Traces held, and the bytes they take (for benchmarks). */
size_t tracemap__traces(const struct tracemap *tm);
size_t tracemap__bytes(const struct tracemap *tm);

#endif /* NUPP_TRACEMAP_H */
