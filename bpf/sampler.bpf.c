// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * sampler.bpf.c - statistical sampler of LuaJIT VM state and Lua stacks.
 *
 * Runs on a timer (a cpu-clock perf_event per CPU, or the scheduler tick) in
 * the context of the interrupted task. For a configured target process it
 * finds the VM (global_State) from the DISPATCH register r14, reads the VM
 * state, picks the stack source that is valid in that state, walks the Lua
 * frames and counts the stack in a hash map. Nothing leaves the kernel per
 * sample; userspace reads the map.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

static __always_inline int lj_read(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}
#define LJ_READ(dst, size, addr) lj_read(dst, size, addr)
#include "lj_walk.h"

const volatile __u32 max_depth = 16;	/* --depth, at most NUPP_MAX_SHOWN */
const volatile __u64 tick_fn;		/* address of the scheduler tick's hrtimer handler */
volatile __u32 paused;			/* set by userspace: count, don't record */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);			/* tgid */
	__type(value, struct nupp_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);			/* tid */
	__type(value, __u64);			/* last global_State validated on it */
} thread_vm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);		/* userspace may resize */
	__uint(key_size, sizeof(struct nupp_stack_key));	/* trimmed to --depth by userspace */
	__uint(value_size, sizeof(struct nupp_stack_counts));
} counts SEC(".maps");

/* Per-CPU scratch: too big for the 512-byte BPF stack. */
struct sampler_scratch {
	struct nupp_stack_key key;	/* first: it is the counts map's key */
	__u8 chunk[LJ_CHUNK + 16];	/* a window of the Lua stack */
	__u8 hdr[LJ_HDR + 8];		/* a GCfunc header */
	__u8 gblk[NUPP_BLK + 8];	/* global_State fields */
	__u8 Lblk[NUPP_BLK + 8];	/* lua_State fields */
	struct lj_walk walk;		/* the walk's state (see lj_walk.h) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sampler_scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NUPP_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		(*c)++;
}

static __always_inline int unresolved(enum nupp_err err)
{
	count(NUPP_CNT_ERR + err);
	return 0;
}

/* Is g a global_State? Its main thread must point back at it (G(mainthread) == g). */
static __always_inline int vm_valid(const struct lj_layout *lj, __u64 g)
{
	__u64 mainth = 0, glref = 0;

	if (!g || lj_read(&mainth, 8, g + lj->g_mainthref))
		return 0;
	mainth &= LJ_GCVMASK;
	if (!mainth || lj_read(&glref, 8, mainth + lj->L_glref))
		return 0;
	return glref == g;
}

/* The VM running on this thread: DISPATCH (r14) is pinned in the interpreter
 * and in GC64 trace code; C code usually preserves it (callee-saved). A
 * candidate equal to the VM last validated on this thread needs no check;
 * one that does not validate falls back to that VM, then to the process's
 * only VM. */
static __always_inline __u64 find_vm(const struct nupp_proc *p, __u64 r14, __u32 tid)
{
	__u64 g = r14 + (__s64)p->lj.disp2g, *last;

	last = bpf_map_lookup_elem(&thread_vm, &tid);
	if (last && *last == g)
		return g;
	if (vm_valid(&p->lj, g)) {
		bpf_map_update_elem(&thread_vm, &tid, &g, BPF_ANY);
		return g;
	}
	return last ? *last : p->g;
}

static __always_inline enum nupp_state state_of(__s32 vmstate)
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

/* bpf_loop's context must be on the stack: the walk's state in map memory,
 * and its buffers. */
struct walk_ctx {
	struct lj_walk *w;
	struct lj_walk_env env;
};

static long walk_cb(__u64 i, void *ctx)
{
	struct walk_ctx *c = ctx;

	return lj_walk_step(c->w, &c->env);
}

/* Zero frame w->depth + i: what the previous sample on this CPU left beyond
 * this stack must not become part of its key. */
static long clear_cb(__u64 i, void *ctx)
{
	struct walk_ctx *c = ctx;
	struct nupp_frame *fr = &c->env.frames[(c->w->depth + i) & (NUPP_MAX_DEPTH - 1)];

	fr->fn = 0;
	fr->pc = 0;
	return 0;
}

/* Where the walk starts (frame link slot and top pc) in each VM state
 * (luajit-internals.md §5): L->base is stale while bytecode or a trace runs.
 * Lblk holds the lua_State's fields, gblk the global_State's. */
static __always_inline int walk_start(const struct nupp_proc *p, struct pt_regs *regs, __u64 g,
				      __s32 vmstate, const __u8 *gblk, const __u8 *Lblk,
				      struct lj_walk *w)
{
	const struct lj_layout *lj = &p->lj;
	__u64 ip = regs->ip, base, cf, saved[2];

	if (vmstate >= 0) {
		/* On trace: BASE at trace entry; the leaf is the trace's start
		 * pc (inlined frames are not materialized). */
		__u64 traces = 0, T = 0, startpc = 0;
		__u64 J = g - lj->gg_g + lj->gg_j;

		base = lj_u64_at(gblk, lj->g_jit_base - p->g_blk, NUPP_BLK);
		if (lj_read(&traces, 8, J + lj->J_trace) ||
		    lj_read(&T, 8, traces + 8 * (__u64)vmstate) ||
		    lj_read(&startpc, 8, (T & LJ_GCVMASK) + lj->T_startpc))
			return NUPP_ERR_READ + 1;
		w->pc = startpc ? startpc + 4 : 0;	/* links point after the instruction */
	} else if (vmstate == LJ_VMST_INTERP && ip >= p->vm_lo && ip < p->vm_hi) {
		base = regs->dx;			/* BASE */
		w->pc = regs->bx;			/* PC, already advanced */
	} else {
		/* C function, GC, recorder, or a helper called by the VM: the VM
		 * synced L->base before calling out, and saved PC in the cframe. */
		base = lj_u64_at(Lblk, lj->L_base - p->L_blk, NUPP_BLK);
		cf = lj_u64_at(Lblk, lj->L_cframe - p->L_blk, NUPP_BLK) & ~3ULL;
		w->pc = 0;
		/* SAVE_L and SAVE_PC are adjacent; SAVE_PC == SAVE_L means no pc. */
		if (vmstate != LJ_VMST_C && cf && lj->cf_pc == lj->cf_L + 8 &&
		    !lj_read(saved, 16, cf + lj->cf_L) && saved[1] != saved[0])
			w->pc = saved[1];
	}
	w->f = base - 8;
	if (w->f <= w->bot)
		return NUPP_ERR_BAD_BASE + 1;
	return 0;
}

static __always_inline int sample(struct pt_regs *regs)
{
	__u64 id = bpf_get_current_pid_tgid(), g, L;
	__u32 pid = id >> 32, tid = (__u32)id, zero = 0;
	struct nupp_stack_counts *c, init = {};
	struct sampler_scratch *sc;
	struct nupp_stack_key *key;
	struct nupp_proc *p;
	struct walk_ctx wc;
	struct lj_walk *w;
	__s32 vmstate;
	int err;

	p = bpf_map_lookup_elem(&procs, &pid);
	if (!p)
		return 0;
	count(NUPP_CNT_SAMPLES);
	if (paused) {
		count(NUPP_CNT_PAUSED);
		return 0;
	}
	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return 0;
	g = find_vm(p, regs->r14, tid);
	if (!g)
		return unresolved(NUPP_ERR_NO_VM);
	/* The fields of g and of the running thread, one read each. */
	/* Lengths in 1..NUPP_BLK, in a form the verifier can bound. */
	if (lj_read(sc->gblk, ((p->g_len - 1) & (NUPP_BLK - 1)) + 1, g + p->g_blk))
		return unresolved(NUPP_ERR_READ);
	vmstate = (__s32)lj_u64_at(sc->gblk, p->lj.g_vmstate - p->g_blk, NUPP_BLK);
	L = lj_u64_at(sc->gblk, p->lj.g_cur_L - p->g_blk, NUPP_BLK) & LJ_GCVMASK;
	if (!L || lj_read(sc->Lblk, ((p->L_len - 1) & (NUPP_BLK - 1)) + 1, L + p->L_blk))
		return unresolved(NUPP_ERR_NO_THREAD);

	key = &sc->key;
	w = &sc->walk;
	__builtin_memset(w, 0, sizeof(*w));
	w->L = L;
	w->bot = lj_u64_at(sc->Lblk, p->lj.L_stack - p->L_blk, NUPP_BLK) + 8;
	/* One frame more than shown: the caller names the outermost one. */
	w->max = (max_depth < NUPP_MAX_SHOWN ? max_depth : NUPP_MAX_SHOWN) + 1;
	wc.w = w;
	wc.env = (struct lj_walk_env){
		.lj = &p->lj, .frames = key->frames, .chunk = sc->chunk, .hdr = sc->hdr,
	};
	err = walk_start(p, regs, g, vmstate, sc->gblk, sc->Lblk, w);
	if (err)
		return unresolved(err - 1);
	if (w->f > lj_u64_at(sc->Lblk, p->lj.L_maxstack - p->L_blk, NUPP_BLK))
		return unresolved(NUPP_ERR_BAD_BASE);
	bpf_loop(NUPP_MAX_DEPTH, walk_cb, &wc, 0);
	if (w->err)
		return unresolved(w->err - 1);
	if (!w->depth)
		return unresolved(NUPP_ERR_NO_FRAME);
	bpf_loop(w->max - w->depth, clear_cb, &wc, 0);
	key->pid = pid;
	key->tid = tid;
	key->g = g;
	key->zone = 0;
	if (p->zone_cur)
		lj_read(&key->zone, 4, p->zone_cur);
	key->depth = w->depth;
	key->truncated = w->depth == w->max;	/* more frames than --depth */

	c = bpf_map_lookup_elem(&counts, key);
	if (!c) {
		if (bpf_map_update_elem(&counts, key, &init, BPF_NOEXIST) == -7 /* -E2BIG */)
			return unresolved(NUPP_ERR_MAP_FULL);
		c = bpf_map_lookup_elem(&counts, key);
		if (!c)
			return unresolved(NUPP_ERR_MAP_FULL);
	}
	__sync_fetch_and_add(&c->state[state_of(vmstate)], 1);
	return 0;
}

SEC("perf_event")
int on_cpu_clock(struct bpf_perf_event_data *ctx)
{
	return sample((struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()));
}

/* The scheduler tick: the hrtimer that runs it expires in hard interrupt
 * context on the interrupted task, at CONFIG_HZ on a busy CPU. Other hrtimers
 * (other profilers' timers among them) are not samples. */
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(on_tick, struct hrtimer *timer, ktime_t *now)
{
	if ((__u64)timer->function != tick_fn)
		return 0;
	return sample((struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()));
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
