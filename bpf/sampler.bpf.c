// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * sampler.bpf.c - statistical sampler of LuaJIT VM state and Lua stacks.
 *
 * Runs on a timer (a cpu-clock perf_event per CPU or on each target thread,
 * or the scheduler tick) in the context of the interrupted task. For a
 * target it finds the VM (global_State) from the DISPATCH register r14,
 * reads the VM state, picks the stack source that is valid in that state,
 * walks the Lua frames and counts the stack in a table that userspace reads
 * in place.
 * Nothing leaves the kernel per sample.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

static __always_inline int lj_read(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}
#define LJ_READ(dst, size, addr) lj_read(dst, size, addr)
#include "sampler_abi.h"

/* Steps a walk may take: twice the frames it keeps, since vararg and
 * dummy frames take a step each and are skipped (rounded up to a batch). */
const volatile __u32 walk_turns = NUPP_MAX_DEPTH;
const volatile __u64 tick_fn;		/* address of the scheduler tick's hrtimer handler */
/* --clock tick at a rate below CONFIG_HZ: the mean number of a target's
 * ticks from one sample to the next, in 1/1024 of a tick (1024: every one). */
const volatile __u32 tick_gap_1024 = 1024;
const volatile __u32 leaf_pc;		/* --lines: record the leaf's pc off trace too */

#include "lj_sample.h"
#include "pid_view.h"
volatile __u32 paused;			/* set by userspace: count, don't record */
/* What a sample counts for: 1, or the factor userspace lowered the rate by
 * (--max-cpu: 2, 4...), so that counts stay samples at the rate asked and
 * every profile of the session keeps one period (sampler__slow_down). */
volatile __u32 weight = 1;
/* The cpu-clock events are the target threads' own (inherited by the
 * threads and processes they start), not one per CPU: see on_cpu_clock. */
const volatile __u32 task_events;
const volatile __u64 period_ns;		/* of the cpu-clock events, as opened */

/* Target processes by slot, their layout in procs[slot]. The first
 * NUPP_MAX_TARGETS slots list their tgid in target_tgid[slot] (0 ends the
 * list, NUPP_TGID_GONE marks one that exited or executed another program):
 * a scan of one cache line costs less than a hash lookup on the cold caches
 * a timer interrupt finds. Later slots (a server's many workers) are found
 * by tgid in more_targets, which holds live targets only. Userspace writes
 * a slot's tgid once; slots are not reused. */
__u32 target_tgid[NUPP_MAX_TARGETS];
/* Set for a slot whose process executed another program (on_exec). */
__u32 target_execed[NUPP_MAX_PLACES];

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_MAX_PLACES);
	__type(key, __u32);			/* tgid */
	__type(value, __u32);			/* slot, from NUPP_MAX_TARGETS on */
} more_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);	/* userspace reads gc_epoch in place */
	__uint(max_entries, NUPP_MAX_PLACES);
	__type(key, __u32);			/* slot */
	__type(value, struct nupp_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);			/* thread_key() */
	__type(value, __u64);			/* last global_State validated on it */
} thread_vm SEC(".maps");

/* A thread of target p: by slot too, so that an entry left by a process that
 * executed another program, or exited and left its tids to others, is not
 * taken for one of the target now in its place (slots are not reused). */
static __always_inline __u64 thread_key(const struct nupp_proc *p, __u32 tid)
{
	return (__u64)p->slot << 32 | tid;
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 16384);		/* userspace sizes it: a power of two */
	__type(key, __u32);
	__type(value, struct nupp_stack_slot);
} counts SEC(".maps");

/* Slots claimed since userspace last looked, with their stacks' frames
 * (struct nupp_new_slot), so that it need neither scan the table nor look
 * the frames up; new_slots_lost is set when this ring was full. Userspace
 * waits on it (sampler__fd, wake__wait in user/session/wake.c). 2 MiB: ~300 new stacks (7 KB each) between two reads. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 2 * 1024 * 1024);
} new_slots SEC(".maps");
__u32 new_slots_lost;

/* Allocated as stacks come (they are few and new ones rare): a preallocated
 * map of --max-stacks large values takes a noticeable time to set up and
 * tear down. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);		/* userspace: --max-stacks */
	__uint(key_size, sizeof(__u64));	/* nupp_stack_key.stack */
	__uint(value_size, sizeof(struct nupp_frame) * NUPP_MAX_DEPTH);	/* --depth + 1 frames */
} stacks SEC(".maps");


struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sampler_scratch);
} scratch SEC(".maps");

/* Per-CPU scratch of a new stack's captures (capture_names(),
 * capture_sites()), copied into its ring record: too big to join the
 * sampler's scratch within a per-CPU value's size. */
struct capture_scratch {
	struct nupp_capture captured[NUPP_CAPTURES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct capture_scratch);
} captures SEC(".maps");

#define NUPP_COUNTERS NUPP_CNT_MAX	/* enum nupp_counter */
#include "counters.h"

/* What a sample counts for: on the CPU the rate's weight, read where it is
 * used (a value loaded once would be live across the walks, and spilled to
 * the stack); at a switch out nothing yet (bpf/offcpu.h counts the wait
 * when the thread comes back). off is a constant of each caller. */
#define SAMPLE_N(off)	((off) ? 0 : weight)

/* A sample that was not counted in a stack's slot: in the counter of why
 * (enum nupp_counter), which sc->missed names too (+ 1). 0. */
static __always_inline int missed(struct sampler_scratch *sc, __u32 counter, bool off)
{
	count_n(counter, SAMPLE_N(off));
	sc->missed = counter + 1;
	return 0;
}

static __always_inline int unresolved(struct sampler_scratch *sc, enum nupp_err err, bool off)
{
	return missed(sc, NUPP_CNT_ERR + err, off);
}

/* Is g a global_State? Its GG_State's main lua_State, at g - gg_g, is
 * g->mainthref and points back at g (G(mainthread) == g): two links at fixed
 * distances from g, as the scan's test (gg_at, user/luajit/lj_target.c).
 * Where any lua_State pointing back would do, C code whose r14 is not
 * DISPATCH could name a pair of heap words that point at each other
 * (kernel-notes/sampler.md, row 11). */
static __always_inline int vm_valid(const struct lj_layout *lj, __u64 g)
{
	__u64 mainth = 0, glref = 0;

	if (!g || lj_read(&mainth, 8, g + lj->g_mainthref) ||
	    (mainth & LJ_GCVMASK) != g - lj->gg_g ||
	    lj_read(&glref, 8, g - lj->gg_g + lj->L_glref))
		return 0;
	return glref == g;
}

/* The VM that value v names, as a lua_State or as a global_State; 0 none. */
static __always_inline __u64 vm_named_by(const struct lj_layout *lj, __u64 v)
{
	__u64 g = 0;

	if (vm_valid(lj, v))
		return v;
	if (!v || lj_read(&g, 8, v + lj->L_glref))
		return 0;
	return vm_valid(lj, g) ? g : 0;
}

/* The VM a callee-saved register of the current task names, or 0: the
 * last resort of a thread whose VM is not known yet (a launched process
 * before the VM scan found it). Its VM's own start-up is C code where r14
 * is not DISPATCH (the library openers, the loader parsing the main
 * chunk), and such code keeps the lua_State, or the global_State, it works
 * on in a register that survives its calls. Global, not inlined: it runs
 * only until the thread's VM is known, and the verifier checks it once. */
__noinline __u64 vm_in_regs(const struct lj_layout *lj)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	__u64 g;

	if (!lj || !regs)
		return 0;
	if ((g = vm_named_by(lj, regs->bx)) || (g = vm_named_by(lj, regs->bp)) ||
	    (g = vm_named_by(lj, regs->r12)) || (g = vm_named_by(lj, regs->r13)) ||
	    (g = vm_named_by(lj, regs->r15)))
		return g;
	return 0;
}

/* Whether the current process has one thread (read only when a sample's
 * VM is not known otherwise). */
static __always_inline bool single_threaded(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return BPF_CORE_READ(task, signal, nr_threads) == 1;
}

/* The VM running on this thread, into sc->key.g (0 none): DISPATCH (r14) is
 * pinned in the interpreter and in GC64 trace code; C code usually preserves
 * it (callee-saved). A candidate equal to the VM last validated on this
 * thread needs no check; one that does not validate falls back to that VM,
 * then, in a process of one thread, to the process's only VM, then to one a
 * callee-saved register names (vm_in_regs), which is kept as the thread's. */
static __always_inline void find_vm(const struct nupp_proc *p, struct sampler_scratch *sc)
{
	__u64 *last, tk;

	sc->key.g = sc->regs.dispatch + (__s64)p->lj.disp2g;
	if (lj_likely(sc->key.g == p->g))	/* the process's only VM, validated at attach */
		return;
	tk = thread_key(p, sc->key.tid);
	last = bpf_map_lookup_elem(&thread_vm, &tk);
	if (last && *last == sc->key.g)
		return;
	if (vm_valid(&p->lj, sc->key.g)) {
		bpf_map_update_elem(&thread_vm, &tk, &sc->key.g, BPF_ANY);
		return;
	}
	/* The process's only VM stands in for a process of one thread alone.
	 * With more, the thread sampled may run no VM (a host's main thread
	 * creating the threads that do) or be making its own, and the scan may
	 * have found another thread's VM only. */
	sc->key.g = last ? *last : single_threaded() ? p->g : 0;
	if (lj_unlikely(!sc->key.g) && (sc->key.g = vm_in_regs(&p->lj)))
		bpf_map_update_elem(&thread_vm, &tk, &sc->key.g, BPF_ANY);
}

/* sc->state, bounded for the verifier (map memory holds unknown numbers). */
static __always_inline __u32 state_index(const struct sampler_scratch *sc)
{
	__u32 st = sc->state;

	return st < NUPP_ST_MAX ? st : 0;
}

/* Where the probe sequence of key starts in the counts table: its stack
 * hash mixed with its thread. Forked workers run the same code at the same
 * addresses, so their stacks hash alike; by the hash alone, the ninth thread
 * on one stack would find all NUPP_PROBES slots taken by the others. */
static __always_inline __u32 first_slot(const struct nupp_stack_key *key)
{
	return (__u32)key->stack ^ key->tid * 0x9e3779b1u;
}

/* Copy len bytes of the target at addr into c; false when they cannot be
 * read. c->addr is set first, so that nothing else need live across the
 * read (the caller's stack stays small, see walk_steps()). */
static __always_inline bool capture(struct nupp_capture *c, __u64 addr, __u32 len)
{
	c->addr = 0;
	if (!len || len > NUPP_CAPTURE_MAX)
		return false;
	c->addr = addr;
	c->len = len;
	/* len again, in a form the verifier bounds to 1..NUPP_CAPTURE_MAX (the
	 * test above may reach it on a copy of len). */
	if (bpf_probe_read_user(c->bytes, ((len - 1) & (NUPP_CAPTURE_MAX - 1)) + 1,
				(const void *)addr))
		c->addr = 0;
	return c->addr != 0;
}

/* Capture a string (a GCstr) at addr: at least what user/luajit/symbolize.c's
 * str_read() reads first of one. Past the end of its page when the next
 * one is mapped: a long string may go on there. */
static __always_inline bool capture_str(struct nupp_capture *c, const struct lj_layout *lj,
					__u64 addr)
{
	__u32 got = 4096 - (__u32)(addr & 4095);	/* to the end of its page */

	if (got > NUPP_CAPTURE_MAX)
		got = NUPP_CAPTURE_MAX;
	if (got < lj->str_size)
		got = lj->str_size;			/* a header across two pages */
	return capture(c, addr, NUPP_CAPTURE_MAX) || capture(c, addr, got);
}

/* Capture the first chunk of a stream of names (varinfo, uvinfo) at addr,
 * as user/luajit/symbolize.c's cursor reads it: up to its page's end. */
static __always_inline bool capture_chunk(struct nupp_capture *c, __u64 addr)
{
	__u32 got = 4096 - (__u32)(addr & 4095);

	return addr && capture(c, addr, got < NUPP_CAPTURE_MAX ? got : NUPP_CAPTURE_MAX);
}

/* Fill cs->captured (struct nupp_capture) for the stack sc just walked: the
 * protos of its innermost Lua frames, then their chunk names, each once. */
__noinline int capture_names(const struct lj_layout *lj, const struct sampler_scratch *sc,
			     struct capture_scratch *cs)
{
	__u32 nprotos = 0, nchunks = 0;

	if (!lj || !sc || !cs)
		return 0;
	for (__u32 i = 0; i < NUPP_SITE_FIRST; i++)
		cs->captured[i].addr = 0;
	for (__u32 i = 0; i < NUPP_CAPTURE_FRAMES && i < sc->key.depth; i++) {
		__u64 fn = sc->walk.frames[i].fn;

		if (nprotos >= NUPP_CAPTURE_PROTOS)
			break;
		if (NUPP_FN_KIND(fn) == NUPP_FN_LUA &&
		    capture(&cs->captured[nprotos], NUPP_FN_VALUE(fn), lj->pt_size))
			nprotos++;
	}
	for (__u32 i = 0; i < NUPP_CAPTURE_PROTOS; i++) {
		__u64 chunk = cs->captured[i].addr ?
			      lj_u64_at(cs->captured[i].bytes, lj->pt_chunkname, NUPP_CAPTURE_MAX) : 0;

		for (__u32 j = 0; j < NUPP_CAPTURE_PROTOS; j++)
			if (j < nchunks && cs->captured[NUPP_CAPTURE_PROTOS + j].addr == chunk)
				chunk = 0;	/* that name is there already */
		if (!chunk || nchunks >= NUPP_CAPTURE_PROTOS)
			continue;
		if (capture_str(&cs->captured[NUPP_CAPTURE_PROTOS + nchunks], lj, chunk))
			nchunks++;
	}
	return 0;
}

/* The scan of capture_site() for the instruction that loaded a called slot
 * (lj_debug_slotname): where it is, what it knows so far. */
struct site_scan {
	const struct nupp_proc *p;
	const struct nupp_site *out;
	__u32 slot;		/* the slot followed (through MOVs) */
	__u32 ins;		/* the instruction that loaded it, */
	__u8 cls;		/* and its class */
	__u8 n;			/* instructions captured, the call last */
	__u8 last;		/* the farthest step back: the header, exclusive */
};			/* small: capture_site()'s stack stays under 64 bytes */

/* One instruction back, the (k + 2)-th from the end: 1 once the scan ends
 * (ss->cls set when it found the load, else 0). A bpf_loop() callback: the
 * verifier checks it once, where it would check a loop's body turn by turn
 * (a quarter of the sampler's load time); the call per turn is paid only
 * when a new stack is announced. */
static long site_scan_step(__u32 k, void *ctx)
{
	struct site_scan *ss = ctx;
	__u32 i = k + 2, ins, op, ra, cls;

	if (i > ss->last)
		return 1;
	ins = lj_u32_at(ss->out->bc.bytes, 4 * (ss->n - i), NUPP_CAPTURE_MAX);
	op = ins & 0xff;
	ra = (ins >> 8) & 0xff;
	cls = op < NUPP_OPS ? ss->p->site_ops[op & (NUPP_OPS - 1)] & NUPP_OP_CLASS : 0;
	if (cls == NUPP_OP_BASE || cls == NUPP_OP_KNIL)
		return ss->slot >= ra && (cls == NUPP_OP_BASE || ss->slot <= ins >> 16);
	if (cls < NUPP_OP_DST || ra != ss->slot)
		return 0;
	if (cls == NUPP_OP_MOV) {
		ss->slot = ins >> 16;
		return 0;
	}
	ss->ins = ins;
	ss->cls = cls;
	return 1;
}

/* Capture what names a frame from its call site at pc in caller (the
 * capture of the caller's proto): what user/luajit/symbolize.c's site_derive()
 * reads, following lj_debug_funcname and lj_debug_slotname. The bytecode
 * up to the call as the symbolizer reads it back, the first chunk of the
 * caller's variable names, and, scanning back from the call for the
 * instruction that loaded the called slot, the string constant it names
 * (GGET, TGETS) or the upvalue names (UGET). Which name LuaJIT gives is
 * decided in userspace; this only keeps what it reads. */
__noinline int capture_site(const struct nupp_proc *p, const struct nupp_capture *caller,
			    __u64 pc, struct nupp_site *out)
{
	struct site_scan ss = { .p = p, .out = out };
	const struct lj_layout *lj;
	__u64 bc, lo, at;
	__u32 n, ins, cls;

	if (!p || !caller || !out)
		return 0;
	lj = &p->lj;
	bc = caller->addr + lj->pt_size;
	n = lj_u32_at(caller->bytes, lj->pt_sizebc, NUPP_CAPTURE_MAX);
	if (pc < bc + 4 || (pc - bc) & 3 || pc - bc > 4 * (__u64)n)
		return 0;
	lo = pc - bc > 4 * NUPP_SITE_BLOCK ? pc - 4 * NUPP_SITE_BLOCK : bc;
	if (!capture(&out->bc, lo, (__u32)(pc - lo)))
		return 0;
	capture_chunk(&out->varinfo, lj_u64_at(caller->bytes, lj->pt_varinfo, NUPP_CAPTURE_MAX));
	n = (__u32)(pc - lo) / 4;	/* instructions captured, the call last */
	ins = lj_u32_at(out->bc.bytes, 4 * (n - 1), NUPP_CAPTURE_MAX);
	cls = p->site_ops[ins & (NUPP_OPS - 1)];
	if ((ins & 0xff) >= NUPP_OPS || !(cls & (NUPP_OP_CALL | NUPP_OP_ITERC)))
		return 0;
	ss.n = n;
	ss.last = n - (lo == bc) < NUPP_SITE_BLOCK ? n - (lo == bc) : NUPP_SITE_BLOCK;
	ss.slot = ((ins >> 8) & 0xff) - (cls & NUPP_OP_ITERC ? 3 : 0);
	bpf_loop(NUPP_SITE_BLOCK - 1, site_scan_step, &ss, 0);
	if (ss.cls == NUPP_OP_UGET)
		capture_chunk(&out->ref, lj_u64_at(caller->bytes, lj->pt_uvinfo, NUPP_CAPTURE_MAX));
	if (ss.cls != NUPP_OP_GGET && ss.cls != NUPP_OP_TGETS)
		return 0;
	/* The constant's slot, below k, then its string. */
	at = lj_u64_at(caller->bytes, lj->pt_k, NUPP_CAPTURE_MAX) -
	     8 * ((__u64)(ss.cls == NUPP_OP_GGET ? ss.ins >> 16 : (ss.ins >> 16) & 0xff) + 1);
	if (capture(&out->ref, at, 8))
		capture_str(&out->str, lj, lj_u64_at(out->ref.bytes, 0, NUPP_CAPTURE_MAX));
	return 0;
}

/* The site captures of cs->captured: for each innermost frame whose caller
 * capture_names() captured, its call site (capture_site()). */
__noinline int capture_sites(const struct nupp_proc *p, const struct sampler_scratch *sc,
			     struct capture_scratch *cs)
{
	__u32 nsites = 0;

	if (!p || !sc || !cs)
		return 0;
	for (__u32 i = NUPP_SITE_FIRST; i < NUPP_CAPTURES; i++)
		cs->captured[i].addr = 0;
	for (__u32 i = 0; i + 1 < NUPP_CAPTURE_FRAMES && i + 1 < sc->key.depth; i++) {
		__u64 caller = sc->walk.frames[i + 1].fn;

		if (nsites >= NUPP_CAPTURE_SITES)
			break;
		if (NUPP_FN_KIND(caller) != NUPP_FN_LUA ||
		    (sc->walk.frames[i].pc & NUPP_CALL_MASK) == NUPP_CALL_OTHER)
			continue;
		for (__u32 j = 0; j < NUPP_CAPTURE_PROTOS; j++) {
			if (cs->captured[j].addr != NUPP_FN_VALUE(caller))
				continue;
			capture_site(p, &cs->captured[j], sc->walk.frames[i + 1].pc & ~(__u64)NUPP_CALL_MASK,
				     (struct nupp_site *)&cs->captured[NUPP_SITE_FIRST + 4 * nsites]);
			nsites++;
			break;
		}
	}
	return 0;
}

/* Tell userspace of slot k, just claimed for sc->key, with its frames and
 * the memory that names them. A wakeup only when userspace had read the
 * ring empty (the ring's default): it names a new stack while its code, and
 * its process, still exist. Global, as the captures it calls: the kernel
 * gives each function its own stack, and the sampler's must stay under the
 * private-stack size (walk_steps()). */
__noinline int announce_slot(__u32 k, const struct nupp_proc *p, struct sampler_scratch *sc)
{
	__u32 zero = 0, n;
	struct capture_scratch *cs = bpf_map_lookup_elem(&captures, &zero);
	struct nupp_new_slot *e;

	if (!p || !sc)
		return 0;
	if (!(e = bpf_ringbuf_reserve(&new_slots, sizeof(*e), 0))) {
		new_slots_lost = 1;
		return 0;
	}
	n = sc->key.depth;
	if (n > NUPP_MAX_DEPTH)
		n = NUPP_MAX_DEPTH;
	e->slot = k;
	e->nframes = n;
	e->gc_epoch = p->gc_epoch;
	capture_names(&p->lj, sc, cs);
	capture_sites(p, sc, cs);
	/* Zeroed on failure: no capture. */
	bpf_probe_read_kernel(e->captured, sizeof(e->captured), cs ? cs->captured : NULL);
	if (n && bpf_probe_read_kernel(e->frames, n * sizeof(struct nupp_frame), sc->walk.frames))
		e->nframes = 0;		/* userspace looks them up */
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* Count one sample of sc->key in state sc->state, for SAMPLE_N(off) (see struct
 * nupp_stack_slot), in slot sc->slot. A new stack's frames are stored
 * before its slot is ready, so that userspace finds them for every key it
 * sees. 0, or enum nupp_err + 1. */
static __always_inline int count_stack(const struct nupp_proc *p, struct sampler_scratch *sc,
				       bool off)
{
	__u32 start = first_slot(&sc->key);

	for (__u32 i = 0; i < NUPP_PROBES; i++) {
		__u32 k = (start + i) & p->counts_mask;
		struct nupp_stack_slot *s = bpf_map_lookup_elem(&counts, &k);
		const __u64 *have, *want = (const __u64 *)&sc->key;

		if (lj_unlikely(!s))
			break;
		if (lj_unlikely(!s->key.stack) &&
		    !__sync_val_compare_and_swap(&s->key.stack, 0, sc->key.stack)) {
			if (bpf_map_update_elem(&stacks, &sc->key.stack, sc->walk.frames,
						BPF_NOEXIST) == -7)
				return NUPP_ERR_MAP_FULL + 1;	/* -E2BIG; the slot stays unready */
			s->key = sc->key;
			s->state[state_index(sc)] = SAMPLE_N(off);
			__sync_lock_test_and_set(&s->ready, 1);	/* after the key */
			sc->slot = k;
			announce_slot(k, p, sc);
			return 0;
		}
		have = (const __u64 *)&s->key;
		if (s->ready && have[0] == want[0] && have[1] == want[1] &&
		    have[2] == want[2] && have[3] == want[3]) {
			__sync_fetch_and_add(&s->state[state_index(sc)], SAMPLE_N(off));
			sc->slot = k;
			return 0;
		}
	}
	return NUPP_ERR_MAP_FULL + 1;
}

/* The slot of live target process pid; NUPP_MAX_PLACES for any other. */
static __always_inline __u32 slot_of(__u32 pid)
{
	__u32 *slot;

	for (__u32 i = 0; i < NUPP_MAX_TARGETS; i++) {
		if (!target_tgid[i])
			return NUPP_MAX_PLACES;
		if (target_tgid[i] == pid)
			return i;
	}
	slot = bpf_map_lookup_elem(&more_targets, &pid);
	return slot ? *slot : NUPP_MAX_PLACES;
}

/* The configuration of target process pid, NULL for any other process. */
static __always_inline struct nupp_proc *proc_of(__u32 pid)
{
	__u32 slot;

	if (!pid)		/* an idle CPU: touch nothing more */
		return NULL;
	slot = slot_of(pid);
	return slot < NUPP_MAX_PLACES ? bpf_map_lookup_elem(&procs, &slot) : NULL;
}


/* One sample of the target process p, counting for SAMPLE_N(off): the
 * thread in sc->key (pid, tid), its registers in sc->regs. Counted in a stack's slot
 * (sc->slot; sc->missed 0), or in a counter (sc->missed: its index + 1). */
static __always_inline int sample(struct nupp_proc *p, struct sampler_scratch *sc, bool off)
{
	struct nupp_stack_key *key = &sc->key;
	struct lj_walk *w;
	int err;

	sc->missed = 0;
	if (lj_unlikely(paused))
		return missed(sc, NUPP_CNT_PAUSED, off);
	find_vm(p, sc);
	if (lj_unlikely(!key->g)) {
		__sync_fetch_and_add(&p->vmless, SAMPLE_N(off));
		return unresolved(sc, NUPP_ERR_NO_VM, off);
	}
	err = sample_walk(p, sc);
	if (lj_unlikely(err))
		return unresolved(sc, err - 1, off);
	/* Addresses derived before the walks would be live across them, and
	 * spilled: derive them again (as in walk_steps()). */
	asm volatile("" : "+r"(sc), "+r"(p));
	key = &sc->key;
	w = &sc->walk.w;
	key->depth = w->depth;
	key->stack = lj_walk_hash_end(w->hash) | 1;	/* 0 marks a free slot */
	key->zone = 0;
	if (p->zone_cur)
		lj_read(&key->zone, 4, p->zone_cur);
	err = count_stack(p, sc, off);
	return err ? unresolved(sc, err - 1, off) : 0;
}

/* Copies the registers the sampler reads out of pt_regs into r (map
 * memory), each load pinned to its own branch: the compiler would otherwise
 * share one load between two kinds of pointer, which the verifier refuses. */
#define VM_REGS(r, regs) do {							\
	const struct pt_regs *rg_ = (regs);					\
	__u64 ip_ = rg_->ip, d_ = rg_->r14, b_ = rg_->dx, rb_ = rg_->bp;	\
	__u64 pc_ = rg_->bx, sp_;						\
	asm volatile("" : "+r"(ip_), "+r"(d_), "+r"(b_), "+r"(pc_), "+r"(rb_));	\
	(r) = (struct vm_regs){ .ip = ip_, .dispatch = d_, .base = b_, .pc = pc_,	\
				.rbp = rb_ };					\
	sp_ = rg_->sp;								\
	asm volatile("" : "+r"(sp_));						\
	(r).sp = sp_;								\
} while (0)

/* This CPU's scratch, where a sample of task starts: its ids. */
static __always_inline struct sampler_scratch *scratch_for(const struct task_struct *task,
							   __u32 pid)
{
	__u32 zero = 0;
	struct sampler_scratch *sc = bpf_map_lookup_elem(&scratch, &zero);

	if (lj_likely(sc != 0)) {
		sc->key.pid = pid;
		sc->key.tid = view_tid(task);
	}
	return sc;
}

/* With task events, does this sample count? Its event must be the
 * process's own: one userspace opened on a thread of it, or one inherited
 * from such (a thread it started since). A process started by another
 * target after the events were opened inherits that one's too, until
 * userspace opens its own: those do not count, or its samples would count
 * twice. Each process's events are opened with a period of their own, the
 * rate's plus its events_tag nanoseconds, which an inherited event keeps
 * and the context gives (the hrtimer's period: perf_swevent_init_hrtimer()).
 * A lowered rate (--max-cpu, weight > 1) keeps one sample in weight, at
 * random: the events' periods stay their tags. */
static __always_inline bool own_event_sample(const struct bpf_perf_event_data *ctx,
					     const struct nupp_proc *p)
{
	if (ctx->sample_period != period_ns + p->events_tag)
		return false;
	return weight <= 1 || bpf_get_prandom_u32() % weight == 0;
}

/* With per-CPU events every CPU runs the sampler for whatever task it
 * interrupted, with task events the targets' threads and what they
 * started: a task of another process returns after its tgid and one cache
 * line of target_tgid. One helper call finds the task; its tgid, pid and (in kernel mode) user
 * registers follow from it. */
SEC("perf_event")
int on_cpu_clock(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 pid = view_tgid(task);
	struct nupp_proc *p = proc_of(pid);
	struct sampler_scratch *sc;

	if (!p || (task_events && !own_event_sample(ctx, p)) || !(sc = scratch_for(task, pid)))
		return 0;
	/* Interrupted in user mode, the interrupt's registers are the task's
	 * user registers: no helper call needed to find them. */
	if (ctx->regs.csx & 3)
		VM_REGS(sc->regs, &ctx->regs);
	else
		VM_REGS(sc->regs, (struct pt_regs *)bpf_task_pt_regs(task));
	sample(p, sc, false);
	return 0;
}

/* Is this tick of a target a sample? At the tick's own rate (and weight 1)
 * each one is. Below it, the ticks of targets on this CPU are thinned: the
 * next sample comes after a gap of floor(mean) or floor(mean) + 1 ticks,
 * drawn so that the gaps average the mean (tick_gap_1024 × weight, --max-cpu
 * doubling it). Jittered gaps keep a thread's count within a sample or two
 * of its ticks × rate / HZ, as a timer at the rate would, and follow no
 * period that a workload could run in step with. */
static __always_inline bool tick_taken(struct sampler_scratch *sc)
{
	__u32 mean = tick_gap_1024 * weight, gap;

	if (mean <= 1024)
		return true;
	if (sc->ticks_left > 1) {
		sc->ticks_left--;
		return false;
	}
	gap = mean >> 10;
	if ((bpf_get_prandom_u32() & 1023) < (mean & 1023))
		gap++;
	sc->ticks_left = gap;
	return true;
}

/* The scheduler tick: the hrtimer that runs it expires in hard interrupt
 * context on the interrupted task, at CONFIG_HZ on a busy CPU. Other hrtimers
 * (other profilers' timers among them) are not samples. */
SEC("raw_tp/hrtimer_expire_entry")
int BPF_PROG(on_tick, struct hrtimer *timer)
{
	struct task_struct *task;
	struct sampler_scratch *sc;
	struct nupp_proc *p;
	__u32 pid;

	if ((__u64)BPF_CORE_READ(timer, function) != tick_fn)
		return 0;
	task = bpf_get_current_task_btf();
	pid = view_tgid(task);
	p = proc_of(pid);
	if (!p || !(sc = scratch_for(task, pid)) || !tick_taken(sc))
		return 0;
	VM_REGS(sc->regs, (struct pt_regs *)bpf_task_pt_regs(task));
	sample(p, sc, false);
	return 0;
}

#include "offcpu.h"
#include "alloc.h"

/* Index x, tested below n (a power of two), masked as well: the compiler
 * would drop a mask it can prove idle, and the verifier may see the test
 * and the index in different registers. */
#define MASKED(x, n) ({ __u32 x_ = (x); asm volatile("" : "+r"(x_)); x_ & ((n) - 1); })

/* A target that executes another program keeps its pid, but its layout
 * and VM are gone with its old image: its slot stops matching before the
 * new program runs, and userspace learns why from target_execed. */
SEC("raw_tp/sched_process_exec")
int on_exec(void *ctx)
{
	__u32 pid = view_current_pid_tgid() >> 32, slot = slot_of(pid);

	if (slot >= NUPP_MAX_PLACES)
		return 0;
	if (slot < NUPP_MAX_TARGETS)
		target_tgid[MASKED(slot, NUPP_MAX_TARGETS)] = NUPP_TGID_GONE;
	else
		bpf_map_delete_elem(&more_targets, &pid);
	target_execed[MASKED(slot, NUPP_MAX_PLACES)] = 1;
	{	/* a wait the sweeps saw before is the old program's: dropped */
		__u32 tid = (__u32)bpf_get_current_pid_tgid();

		bpf_map_delete_elem(&sweep_seen, &tid);
	}
	return 0;
}

/* lj_gc_separateudata(g, all): called in the atomic phase of every GC cycle,
 * before its sweep frees anything, and by lua_close before it frees all.
 * What the process's walks cached may be freed from now on: retire it
 * (lj_walk.h). A plain uprobe: LuaJIT never unwinds through it. */
SEC("uprobe")
int on_gc_cycle(struct pt_regs *ctx)
{
	struct nupp_proc *p = proc_of(view_current_pid_tgid() >> 32);
	__u64 epoch = p ? p->gc_epoch : 0;

	/* Not from 0: userspace sets 0 to turn the caches off, and may do so
	 * between the load and the swap. A swap lost to another VM's GC
	 * cycle in the same process moved the epoch all the same. */
	if (epoch)
		__sync_val_compare_and_swap(&p->gc_epoch, epoch, epoch + 1);
	if (p && (int)PT_REGS_PARM2(ctx))	/* all: lua_close (code_sites.c checks both calls) */
		__sync_fetch_and_add(&p->vm_closes, 1);
	return 0;
}

/* luaL_openlibs(L): a new VM's first call (luajit's pmain, OpenResty's
 * ngx_http_lua_new_state), before the library openers and the loader run
 * as C code where r14 is not DISPATCH. The thread's VM is known from here
 * on, not from the next scan of the process (up to a millisecond later,
 * 1-3 samples of each launch otherwise), and the samples that found no VM
 * until now ran before any Lua code. Attached only to a process with no VM
 * yet; a plain uprobe at the function's verified entry. */
SEC("uprobe")
int on_openlibs(struct pt_regs *ctx)
{
	__u64 id = view_current_pid_tgid(), g, tk;
	struct nupp_proc *p = proc_of(id >> 32);

	if (!p || !(g = vm_named_by(&p->lj, PT_REGS_PARM1(ctx))))
		return 0;
	tk = thread_key(p, (__u32)id);
	bpf_map_update_elem(&thread_vm, &tk, &g, BPF_ANY);
	if (!p->vmless_named)
		__sync_val_compare_and_swap(&p->vmless_named, 0, p->vmless + 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
