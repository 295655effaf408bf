/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * alloc.h - the sampler's allocation clock (record --alloc): bytes the VM
 * allocates, sampled by bytes as Go's runtime samples its heap, charged to
 * the Lua stack that allocated them. Included by sampler.bpf.c, whose
 * targets, walk and counts table it shares; a sampler opened with this
 * clock loads this program instead of its timers.
 *
 * Every allocation, resize and free of a VM goes through g->allocf(ud, ptr,
 * osize, nsize) (lj_mem_realloc, lj_mem_newgco, lj_mem_free). One program,
 * attached as a uprobe session at that function's verified entry, runs at
 * its entry and, when the entry asks for it, at its return:
 *  - at the entry, a free (nsize 0) or a resize (ptr set) of a sampled
 *    block takes it out of alloc_live; then the thread's countdown of bytes
 *    (an exponential draw of mean alloc_mean: a Poisson process over the
 *    bytes allocated) drops by nsize, and only an allocation that crosses
 *    it is sampled: its Lua stack walked and counted in its slot, weighted
 *    by the bytes it stands for, and its return asked for;
 *  - at that return, the block's address goes into alloc_live, so that the
 *    bytes still in use at the end are the sampled blocks never freed.
 * The return is asked for sampled allocations only (a session's entry
 * returning 0), so every other call costs the trap at the entry alone. A
 * session's return is a uretprobe: safe here because an allocator never
 * raises a Lua error (lua_Alloc's contract; LuaJIT raises after it returns
 * NULL), so LuaJIT never unwinds through it (kernel-notes/alloc.md).
 *
 * What the return needs of its call is kept in the thread's storage, not
 * in the session's cookie, and a run is the return of the thread's pending
 * call, not asked with bpf_session_is_return(): both are kfuncs, and a
 * kfunc has libbpf read the kernel's whole BTF at every load of the
 * sampler (tests/sampler/test_bpf_objects.py). The allocator does not call
 * itself, so after an entry that asked for its return the thread's next
 * run is that return.
 */
#ifndef NUPP_ALLOC_H
#define NUPP_ALLOC_H

const volatile __u64 alloc_mean;	/* --alloc-mean: bytes between two samples, on average */
/* An exponential draw of mean 1, << NUPP_ALLOC_EXP_SHIFT: cell i holds the
 * mean of -ln(u) over u in [i/N, (i+1)/N) (user/sampler/allocs.c). */
const volatile __u32 alloc_exp[NUPP_ALLOC_EXP];
/* x / (1 - e^-x) << 16 at x = i / NUPP_ALLOC_STEPS: what a sampled block of
 * x means stands for, in means (the inverse of its chance to be sampled,
 * times its size). */
const volatile __u32 alloc_scale[NUPP_ALLOC_SCALE + 1];

/* Blocks sampled and not freed, by process slot and address. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NUPP_ALLOC_LIVE_MAX);
	__type(key, struct nupp_alloc_key);
	__type(value, struct nupp_alloc_live);
} alloc_live SEC(".maps");

/* Objects sampled by counts slot (bytes are in the slot's state[]), in
 * 1/NUPP_ALLOC_ONE: a sampled small block stands for many. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 16384);		/* userspace: as many as counts */
	__type(key, __u32);
	__type(value, __u64);
} alloc_objects SEC(".maps");

/* A thread's bytes to go before its next sample, and its call whose
 * return is pending. */
struct alloc_countdown {
	__s64 left;
	__u64 drawn;		/* 0 until the first draw */
	__u64 pending;		/* ALLOC_CALL() of the sampled call returning, 0 none */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct alloc_countdown);
} alloc_left SEC(".maps");

__u64 alloc_untracked;		/* sampled blocks alloc_live had no room for */

static __always_inline __s64 alloc_draw(void)
{
	__u32 i = bpf_get_prandom_u32() & (NUPP_ALLOC_EXP - 1);

	return (__s64)((alloc_mean * alloc_exp[i]) >> NUPP_ALLOC_EXP_SHIFT) + 1;
}

/* The bytes a sampled block of size bytes stands for: mean * g(size/mean),
 * g from alloc_scale, linear between its points; its size alone from
 * NUPP_ALLOC_SCALE / NUPP_ALLOC_STEPS means on (g(x) = x there, to 1e-7). */
static __always_inline __u64 alloc_weight(__u64 size)
{
	__u64 mean = alloc_mean, x = size * NUPP_ALLOC_STEPS, i, frac, lo, hi;

	if (!mean)
		return size;
	i = x / mean;
	frac = x - i * mean;
	if (i >= NUPP_ALLOC_SCALE)
		return size;
	lo = alloc_scale[i & (NUPP_ALLOC_SCALE - 1)];
	hi = alloc_scale[(i & (NUPP_ALLOC_SCALE - 1)) + 1];
	return (mean * lo + (hi - lo) * frac) >> 16;
}

/* What the return needs of the sampled call (never 0: a size is not). */
#define ALLOC_CALL(slot, state, size) \
	((__u64)(slot) | (__u64)(state) << 24 | (__u64)(size) << 28)
#define ALLOC_SLOT(c)	((__u32)(c) & 0xffffff)
#define ALLOC_STATE(c)	((__u32)((c) >> 24) & 0xf)
#define ALLOC_SIZE(c)	((c) >> 28)

/* lua_close frees every object (lj_gc_freeall), which marks them all dead
 * first: currentwhite = LJ_GC_WHITES | LJ_GC_SFIXED. From then on the
 * blocks in use stay as the program left them: a launched program's
 * profile says what it held when its VM closed, not nothing. */
#define LJ_GC_SFIXED	0x40

static __always_inline bool vm_closing(const struct nupp_proc *p)
{
	__u8 white = 0;

	return p->g_currentwhite && !lj_read(&white, 1, p->g + p->g_currentwhite) &&
	       (white & LJ_GC_SFIXED);
}

static __always_inline int alloc_entry(struct pt_regs *ctx, struct task_struct *task,
				       struct nupp_proc *p, __u32 pid, struct alloc_countdown *cd)
{
	__u64 ptr = PT_REGS_PARM2(ctx), nsize = PT_REGS_PARM4(ctx), w, *objs;
	struct nupp_alloc_key key;
	struct sampler_scratch *sc;
	struct nupp_stack_slot *slot;
	__u32 k;

	key = (struct nupp_alloc_key){ .slot = p->slot, .addr = ptr };
	if (ptr && !vm_closing(p))
		bpf_map_delete_elem(&alloc_live, &key);	/* a sampled block freed or moved */
	if (!nsize)
		return 1;
	if (lj_unlikely(!cd->drawn)) {
		cd->left = alloc_draw();
		cd->drawn = 1;
	}
	cd->left -= nsize;
	if (lj_likely(cd->left > 0))
		return 1;
	cd->left = alloc_draw();
	if (paused || !(sc = scratch_for(task, pid)))
		return 1;
	VM_REGS(sc->regs, ctx);
	sample(p, sc, true);		/* claims the slot, counts nothing */
	w = alloc_weight(nsize);
	if (sc->missed) {		/* as a wait whose walk failed (offcpu.h) */
		count_n(sc->missed - 1, w);
		if (sc->missed - 1 == NUPP_CNT_ERR + NUPP_ERR_NO_VM)
			__sync_fetch_and_add(&p->vmless, w);
		return 1;
	}
	k = sc->slot;
	if ((slot = bpf_map_lookup_elem(&counts, &k)))
		__sync_fetch_and_add(&slot->state[state_index(sc)], w);
	if ((objs = bpf_map_lookup_elem(&alloc_objects, &k)))
		__sync_fetch_and_add(objs, (w << 16) / nsize);
	/* The walk may have taken long enough for the storage to be looked
	 * up again rather than kept across it. */
	if (!(cd = bpf_task_storage_get(&alloc_left, task, 0, 0)))
		return 1;
	cd->pending = ALLOC_CALL(k, state_index(sc), nsize < (1ULL << 36) ? nsize : (1ULL << 36) - 1);
	return 0;			/* and run at its return */
}

static __always_inline int alloc_return(struct pt_regs *ctx, struct nupp_proc *p, __u64 c)
{
	__u64 addr = PT_REGS_RC(ctx), size;
	struct nupp_alloc_live live;
	struct nupp_alloc_key key;

	if (!addr)
		return 0;
	size = ALLOC_SIZE(c);
	key = (struct nupp_alloc_key){ .slot = p->slot, .addr = addr };
	live = (struct nupp_alloc_live){
		.slot = ALLOC_SLOT(c), .state = ALLOC_STATE(c), .bytes = alloc_weight(size),
	};
	live.objects = size ? (live.bytes << 16) / size : 0;
	if (bpf_map_update_elem(&alloc_live, &key, &live, BPF_ANY))
		__sync_fetch_and_add(&alloc_untracked, 1);
	return 0;
}

/* g->allocf of the target's VMs, attached as a uprobe session
 * (BPF_TRACE_UPROBE_SESSION, set by userspace before the load). */
SEC("uprobe")
int on_alloc(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 pid = view_tgid(task);
	struct nupp_proc *p = proc_of(pid);
	struct alloc_countdown *cd;
	__u64 call;

	/* One lookup a call, made at the thread's first: its countdown, and
	 * the sampled call whose return this is. */
	if (!p || !(cd = bpf_task_storage_get(&alloc_left, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE)))
		return 1;
	if ((call = cd->pending)) {
		cd->pending = 0;
		return alloc_return(ctx, p, call);
	}
	return alloc_entry(ctx, task, p, pid, cd);
}

#endif /* NUPP_ALLOC_H */
