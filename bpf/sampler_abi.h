/* SPDX-License-Identifier: MIT */
/* sampler_abi.h - the records sampler.bpf.c and the sampler (user/sampler/) share. */
#ifndef NUPP_SAMPLER_ABI_H
#define NUPP_SAMPLER_ABI_H

#include "places.h"
#include "lj_layout.h"

#define NUPP_MAX_DEPTH	128	/* frames a key can hold; a power of two */
#define NUPP_MAX_SHOWN	(NUPP_MAX_DEPTH - 1)	/* upper bound of --depth: a cut
						 * stack keeps one more frame to name
						 * its outermost one */

/* How a frame was called, which decides how its name is derived (the
 * caller's call site, a metamethod, or no name at all; lj_debug_funcname). */
enum nupp_call {
	NUPP_CALL_LUA	= 0,	/* called from Lua bytecode: the caller's pc names it */
	NUPP_CALL_CONT	= 1,	/* metamethod continuation: the caller's pc names the metamethod */
	NUPP_CALL_OTHER	= 2,	/* from C, pcall or lua_call: no name */
	NUPP_CALL_MASK	= 3,
};

/* What runs in a frame, by an identity that outlives the GCfunc: closures
 * are often short-lived, their proto, C function or builtin number are not.
 * The kind sits in the top byte of nupp_frame.fn (user addresses use 47 bits). */
enum nupp_fn_kind {
	NUPP_FN_LUA	= 0,	/* low bits: GCproto * */
	NUPP_FN_C	= 1,	/* low bits: lua_CFunction */
	NUPP_FN_FF	= 2,	/* low bits: ffid of a builtin (fast function) */
};
#define NUPP_FN_SHIFT		56
#define NUPP_FN(kind, v)	((__u64)(kind) << NUPP_FN_SHIFT | (v))
#define NUPP_FN_KIND(fn)	((__u32)((fn) >> NUPP_FN_SHIFT))
#define NUPP_FN_VALUE(fn)	((fn) & ((1ULL << NUPP_FN_SHIFT) - 1))

/* One Lua stack frame as the sampler saw it. */
struct nupp_frame {
	__u64 fn;	/* NUPP_FN(enum nupp_fn_kind, identity) */
	__u64 pc;	/* current BCIns * in the function, pointing after the
			 * instruction (0 unknown) | enum nupp_call in the low 2 bits;
			 * or, in the leaf on trace, a NUPP_PC_TRACE position */
};

/* The leaf's pc on trace: where the trace's machine code was interrupted,
 * which userspace maps through the trace's snapshots to the frames inlined
 * into it and their bytecode (user/sampler/tracemap.c). Bit 63 set; the trace number
 * (g->vmstate) in bits 34..49; the interrupted instruction's address less
 * nupp_proc.vm_lo, a signed 32-bit number (LuaJIT allocates trace code
 * within 2 GiB of its interpreter), in bits 2..33; the call kind in bits 0..1
 * as in every frame. A sample whose address does not fit keeps pc 0. */
#define NUPP_PC_TRACE			(1ULL << 63)
#define NUPP_PC_TRACE_MAKE(traceno, off) \
	(NUPP_PC_TRACE | (__u64)((traceno) & 0xffff) << 34 | (__u64)(__u32)(off) << 2)
#define NUPP_PC_IS_TRACE(pc)		(((pc) & NUPP_PC_TRACE) != 0)
#define NUPP_PC_TRACENO(pc)		((__u32)((pc) >> 34) & 0xffff)
#define NUPP_PC_TRACEOFF(pc)		((__s32)(__u32)((pc) >> 2))

/* VM states a sample is counted under (the Lua API's vmstate names). */
enum nupp_state {
	NUPP_ST_COMPILED,	/* g->vmstate >= 0: a trace is running */
	NUPP_ST_INTERP,		/* interpreter */
	NUPP_ST_C,		/* C function */
	NUPP_ST_GC,		/* garbage collector */
	NUPP_ST_COMPILING,	/* trace exit, recorder, optimizer, assembler */
	NUPP_ST_MAX,
};

/* The state a g->vmstate value is counted under (the sampler, and dump). */
static inline enum nupp_state nupp_state_of(__s32 vmstate)
{
	if (vmstate >= 0)
		return NUPP_ST_COMPILED;
	switch (vmstate) {
	case LJ_VMST_INTERP: return NUPP_ST_INTERP;
	case LJ_VMST_C: return NUPP_ST_C;
	case LJ_VMST_GC: return NUPP_ST_GC;
	default: return NUPP_ST_COMPILING;	/* EXIT, RECORD, OPT, ASM: as lj_profile counts them */
	}
}

/* Why a sample of a target process could not be resolved. */
enum nupp_err {
	NUPP_ERR_NO_VM,		/* no validated global_State for the thread */
	NUPP_ERR_NO_THREAD,	/* g->cur_L is not a thread of that VM */
	NUPP_ERR_BAD_BASE,	/* frame base outside the thread's stack */
	NUPP_ERR_BAD_FRAME,	/* a frame slot that does not hold a function */
	NUPP_ERR_READ,		/* target memory could not be read */
	NUPP_ERR_NO_FRAME,	/* the walk found no frame at all */
	NUPP_ERR_VM_CLOSED,	/* the VM's own memory is gone: lua_close ran */
	NUPP_ERR_MAP_FULL,	/* the counts map is full */
	NUPP_ERR_MAX,
};

/* Aggregation key: one distinct stack of one thread of one VM. The stack's
 * frames are stored once, under their hash, in a second map (whose value size
 * userspace sets to --depth + 1 frames): a small key is cheaper to compare
 * on every sample than the frames. */
struct nupp_stack_key {
	__u32 pid;		/* tgid */
	__u32 tid;
	__u64 g;		/* global_State * of the VM */
	__u32 zone;		/* zone path id open in the target, 0 none */
	__u16 depth;		/* frames used, at most --depth + 1 */
	__u16 truncated;	/* 1: the stack goes on past frame depth - 1, which
				 * is only the caller of the outermost shown one */
	__u64 stack;		/* hash of the frames, never 0: key of the stacks map */
};

/* Target memory a new slot's record carries: what naming its stack reads
 * first, copied at its first sample. The headers of the GCprotos of its
 * innermost Lua frames (NUPP_CAPTURE_PROTOS of them at most), then their
 * chunk names, each once: NUPP_CAPTURE_MAX bytes from the string's header,
 * or to the end of its page when the next page is not mapped (at least
 * what the symbolizer's str_read() reads first). Userspace reads
 * these bytes instead of the process: no read waits on the target's
 * mmap_lock, and a function freed, or a process gone, before the next wake
 * is still named. */
#define NUPP_CAPTURE_PROTOS	3
#define NUPP_CAPTURE_SITES	3
#define NUPP_SITE_FIRST		(2 * NUPP_CAPTURE_PROTOS)	/* the protos, their chunk names */
#define NUPP_CAPTURES		(NUPP_SITE_FIRST + 4 * NUPP_CAPTURE_SITES)
#define NUPP_CAPTURE_MAX	256
#define NUPP_CAPTURE_FRAMES	8	/* innermost frames looked at for Lua ones */
#define NUPP_SITE_BLOCK		64	/* instructions captured up to a call site, the
					 * call included: what the symbolizer reads back
					 * at once (BC_BLOCK) and the call */

struct nupp_capture {
	__u64 addr;		/* target address of bytes; 0: none */
	__u32 len;
	__u32 pad;
	__u8 bytes[NUPP_CAPTURE_MAX];
};

/* What names a frame from its caller's call site (lj_debug_funcname), four
 * consecutive captures of a record. */
struct nupp_site {
	struct nupp_capture bc;		/* the caller's bytecode, up to the call */
	struct nupp_capture varinfo;	/* the first chunk of its variable names */
	struct nupp_capture ref;	/* the slot of the string constant that loaded
					 * the called slot, or the first chunk of the
					 * upvalue names */
	struct nupp_capture str;	/* that string */
};

/* What the sampler's scan for the instruction that loaded a called slot
 * (capture_site(), after lj_debug_slotname) does with an opcode: a class
 * (the low bits) and whether it calls. By opcode in nupp_proc.site_ops,
 * derived from the build's bytecode modes (symbolizer__site_ops). */
enum nupp_site_op {
	NUPP_OP_OTHER,		/* A is neither a base nor a destination */
	NUPP_OP_BASE,		/* slots from A on are written */
	NUPP_OP_KNIL,		/* slots A to D are written */
	NUPP_OP_DST,		/* A is written, by nothing that names it */
	NUPP_OP_MOV,		/* A = D: the name is D's */
	NUPP_OP_GGET,		/* A = _G[string constant D] */
	NUPP_OP_TGETS,		/* A = B[string constant C] */
	NUPP_OP_UGET,		/* A = upvalue D */
	NUPP_OP_CLASS = 15,
	NUPP_OP_CALL = 16,	/* a call of slot A */
	NUPP_OP_ITERC = 32,	/* a call of slot A - 3 */
};
#define NUPP_OPS	128

/* A record of the new_slots ring: a slot just claimed, and its stack's
 * frames (key.depth of them), so that userspace names the stack without
 * asking the stacks map. */
struct nupp_new_slot {
	__u32 slot;		/* index in the counts table */
	__u32 nframes;		/* frames below: the key's depth */
	__u64 gc_epoch;		/* nupp_proc.gc_epoch at the sample: the names
				 * userspace knew then still hold for it */
	struct nupp_capture captured[NUPP_CAPTURES];
	struct nupp_frame frames[NUPP_MAX_DEPTH];
};

/* Counts are kept in an open-addressed table: an mmap-able array that
 * userspace reads in place, indexed by the stack hash and probed linearly for
 * at most NUPP_PROBES slots. A sample costs one cache line, not a hash-map
 * lookup. Slots are claimed, never freed; two CPUs claiming a slot for one
 * key at once leave two slots with it, which userspace adds up. */
#define NUPP_PROBES	8

struct nupp_stack_slot {
	struct nupp_stack_key key;	/* key.stack == 0: free */
	__u64 state[NUPP_ST_MAX];	/* samples by enum nupp_state */
	__u64 ready;			/* 1 once key is complete */
};

/* Off the CPU (the sampler's off-CPU clock, bpf/offcpu.h): where a wait
 * of a target thread was spent. The Lua stack at the switch back is the
 * stack of counts slot `slot` (which counts the wait's nanoseconds too);
 * the kernel side is the system call the thread was in and the wait
 * channel, the first kernel function on its stack outside the scheduler. */
struct nupp_wait_key {
	__u32 slot;		/* in the counts table; NUPP_WAIT_UNCOUNTED: the
				 * walk failed, and state is the counter
				 * (enum nupp_counter) it was counted in */
	__u32 state;		/* enum nupp_state at the switch */
	__s32 syscall;		/* the system call's number; -1: none (preempted in
				 * user mode, or a fault); NUPP_WAIT_COROUTINE: a
				 * coroutine's wait from its yield to its resume */
	__u32 preempted;	/* 1: switched out runnable (--include-preempted) */
	__u64 wchan;		/* kernel address of the wait channel, 0 unknown */
};

struct nupp_wait {
	__u64 ns;		/* time off the CPU */
	__u64 n;		/* waits */
};

/* A target thread switched out, in its task's storage (map off_since):
 * what its wait will be charged to. Userspace reads it too, for a wait
 * still under way (user/sampler/waits.c). */
struct nupp_off_since {
	__u64 ts;			/* bpf_ktime_get_ns(); 0: none pending */
	struct nupp_wait_key wait;	/* its stack's slot, state, kernel side */
	__u64 weight;			/* what the wait counts for: switch_every then */
	__u64 ran;			/* the thread's se.sum_exec_runtime then (ns) */
	__u64 switches;			/* its nvcsw + nivcsw at its last switch out */
};

/* A target thread the sampled off-CPU clock's sweeps found switched out
 * (map sweep_seen, by kernel tid): the time they saw, until the thread
 * comes back and its stack is walked (bpf/offcpu.h). Userspace charges
 * what is left when the session ends. */
struct nupp_sweep_seen {
#if defined(__bpf__) && defined(NUPP_HAVE_TASK_WORK)
	struct bpf_task_work tw;	/* the walk asked for, run at the return */
#else
	__u64 tw;
#endif
	__u64 ns;			/* seen off the CPU, not charged yet */
	__u64 switches;			/* nvcsw + nivcsw when last seen */
	struct nupp_wait_key wait;	/* its kernel side (slot and state unused) */
	__u32 pending;			/* the walk is asked for */
	__u32 pid, tid;			/* the thread's ids, as nupp-bpf sees them */
	__u32 pad;
};

#define NUPP_WAIT_UNCOUNTED	0xffffffffU
#define NUPP_WAIT_COROUTINE	(-2)
/* The cookie of a --waits probe inside the VM's coroutine fast functions:
 * the coroutine is in rbp (bpf/offcpu.h); 0: the first argument of
 * lua_yield or lua_resume. */
#define NUPP_CO_IN_RBP	1
#define NUPP_KSTACK	12	/* kernel frames searched for the wait channel */

/* The allocation clock (bpf/alloc.h). A sampled block still in use, by
 * the slot of its process and its address. */
struct nupp_alloc_key {
	__u32 slot;		/* the process's (nupp_proc.slot) */
	__u32 pad;
	__u64 addr;
};

struct nupp_alloc_live {
	__u32 slot;		/* its stack's, in the counts table */
	__u32 state;		/* enum nupp_state at the allocation */
	__u64 bytes;		/* the bytes it stands for */
	__u64 objects;		/* the blocks it stands for, in 1/NUPP_ALLOC_ONE */
};

#define NUPP_ALLOC_ONE		(1 << 16)	/* an object in alloc_objects */
#define NUPP_ALLOC_EXP		1024	/* cells of the exponential draw */
#define NUPP_ALLOC_EXP_SHIFT	20	/* its fixed point */
#define NUPP_ALLOC_STEPS	64	/* points of alloc_scale per mean */
#define NUPP_ALLOC_SCALE	1024	/* its points, to 16 means; a power of two */
#define NUPP_ALLOC_LIVE_MAX	(1 << 17)	/* sampled blocks in use followed */

#define NUPP_MAX_TARGETS	64	/* slots found by a scan of target_tgid; later
					 * ones, up to NUPP_MAX_PLACES, by a lookup */
#define NUPP_TGID_GONE	0xffffffffU	/* target_tgid of a slot whose process exited
					 * or executed another program: above
					 * every pid, so it matches none */

#define NUPP_CODE_RANGES	8	/* nupp_proc.code: files' code mappings */
#define NUPP_RET_SCAN	256	/* words from rsp searched for the return into a
				 * trace of a C helper it called (2 KiB: the
				 * GC's steps and nginx's output filters run
				 * deeper than 512 bytes), */
#define NUPP_RET_CHUNK	64	/* read this many at a time */
#define NUPP_BLK	256	/* bytes of a lua_State read at once */
#define NUPP_GG_BLK	1024	/* bytes of a GG_State read at once */

/* Per target process, written by userspace at attach. Every sample reads
 * it, on a cache that the interrupted program has made cold: the fields a
 * sample needs come first (those of lj too), so that they share few lines,
 * and the sampler's own settings are copied here rather than read from
 * rodata, which would be a line more. */
struct nupp_proc {
	__u64 g;		/* the process's only VM, 0 when several or unknown */
	__u64 gc_epoch;		/* the walk caches' epoch (lj_walk.h), bumped at
				 * each GC cycle's atomic phase; 0: no caches */
	__u64 zone_cur;		/* address of the target's u32 current zone id, 0 none */
	__u64 vm_lo, vm_hi;	/* interpreter code range (lj_vm_asm_begin..) */
	struct nupp_code_range {	/* the files' code near it (LuaJIT's C code,
					 * the C library...): not trace code; hi 0 ends */
		__u64 lo, hi;
	} code[NUPP_CODE_RANGES];
	__u32 gg_blk, gg_len;	/* the fields of the main lua_State and the
				 * global_State the sampler needs lie in
				 * [GG + gg_blk, + gg_len), gg_len <= NUPP_GG_BLK */
	__u32 L_blk, L_len;	/* a lua_State's in [L + L_blk, + L_len), L_len <= NUPP_BLK */
	__u32 max_frames;	/* frames a walk keeps: --depth + 1, at most NUPP_MAX_DEPTH */
	__u32 counts_mask;	/* slots of the counts table - 1 */
	struct lj_layout lj;
	__u32 slot;		/* its own slot; read only when the VM is not p->g */
	__u32 events_tag;	/* task events: what its events' period has over
				 * the rate's, in ns (own_event_sample()) */
	__u64 vmless;		/* its samples that found no VM (NUPP_ERR_NO_VM): userspace
				 * tells apart those taken before it had one */
	__u64 vmless_named;	/* vmless + 1 when luaL_openlibs first named a VM
				 * (on_openlibs), 0 before: every sample that found
				 * none until then ran before any Lua code */
	__u64 vm_closes;	/* lua_close's calls of the GC probe (on_gc_cycle):
				 * from the first, the code of a stack not named
				 * yet may be gone while the process runs on */
	__u8 site_ops[NUPP_OPS];	/* enum nupp_site_op by opcode; all 0 when
					 * the build has no bytecode modes */
	__u32 g_currentwhite;	/* --alloc: offset of g->gc.currentwhite in the
				 * only VM (g), 0 when not verified there: its
				 * frees from lua_close on are not frees of what
				 * the program held (bpf/alloc.h) */
};

/* Process-wide counters (per-CPU array, index enum nupp_counter). A
 * sample of a target is counted once: in its stack's slot, or here. The
 * total is their sum (a counter of every sample would cost each a cache
 * line more). */
enum nupp_counter {
	NUPP_CNT_PAUSED,	/* samples dropped while paused */
	NUPP_CNT_ERR,		/* first of NUPP_ERR_MAX error counters */
	NUPP_CNT_MAX = NUPP_CNT_ERR + NUPP_ERR_MAX,
};

#endif /* NUPP_SAMPLER_ABI_H */
