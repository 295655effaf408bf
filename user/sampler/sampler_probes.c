// SPDX-License-Identifier: MIT
/*
 * sampler_probes.c - the uprobes the sampler puts in a target, each at a
 * function entry verified by decoding: on the atomic phase of LuaJIT's GC
 * cycle, whose hits move the GC epoch that retires the walk caches (on at
 * attach, off for a target that cycles too often, on again later), and on
 * luaL_openlibs, which names a new VM to the sampler at once. Both can be
 * opened while the sampler's BPF object still loads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <bpf/libbpf.h>
#include "luajit/code_sites.h"
#include "luajit/vm_coroutines.h"
#include "sampler_int.h"
#include "base/say.h"
#include "base/libbpf_setup.h"
#include "base/uprobe.h"
#include "luajit/symbolize.h"
#include "tracemap.h"
#include "base/util.h"

/* The walk caches off: the probe goes (its removal waits for a grace
 * period, here or, aside, on a thread of its own). */
void disable_walk_caches(struct target *tg, bool aside)
{
	if (aside)
		uprobe__detach_aside(tg->gc_probe);
	else
		uprobe__detach(tg->gc_probe);
	tg->gc_probe = NULL;
	tg->proc.gc_epoch = 0;
}

/* The file offset of t's function at address at (0: the build has no such
 * function) for a uprobe, only where its first instruction decodes as a
 * function's entry; 0 when there is none. */
static __u64 entry_probe_offset(const struct lj_target *t, __u64 at)
{
	__u64 off = at ? lj_target__file_offset(t, at) : 0;

	if (!off || code_sites__verify(t->path, at, CODE_SITE_FUNC_ENTRY, &t->layout, NULL, 0))
		return 0;
	return off;
}

/* Uprobes opened while the sampler still loads (sampler__open_probes_early):
 * the kernel takes 15-25 ms to register one here, most of it waiting for an
 * RCU grace period (register_for_each_vma takes dup_mmap_sem for writing),
 * time the verifier spends on the sampler's programs anyway. Only where
 * uprobes are perf events (user/base/uprobe.h): a uprobe_multi link needs
 * its program loaded. Only the main thread opens and takes them. */
static struct early_probe {
	pid_t pid;
	__u64 at;
	int fd;			/* a uprobe perf_event, no program attached yet */
} early_probes[8];
static int nearly_probes;

/* The uprobe PMU's type, or -1: a kernel without it gets libbpf's probes. */
static int uprobe_pmu_type(void)
{
	static int type = -2;
	FILE *f;

	if (type == -2) {
		f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
		if (!f || fscanf(f, "%d", &type) != 1)
			type = -1;
		if (f)
			fclose(f);
	}
	return type;
}

static void open_probe_early(const struct lj_target *t, __u64 at)
{
	struct perf_event_attr pa = { .size = sizeof(pa) };
	int type = uprobe_pmu_type(), fd;
	__u64 off;

	if (nearly_probes == sizeof(early_probes) / sizeof(early_probes[0]) || type < 0 ||
	    uprobe__multi() || !(off = entry_probe_offset(t, at)))
		return;
	pa.type = type;
	pa.config1 = (__u64)(uintptr_t)t->path;
	pa.config2 = off;
	fd = syscall(__NR_perf_event_open, &pa, t->pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd >= 0)
		early_probes[nearly_probes++] = (struct early_probe){ t->pid, at, fd };
}

static bool want_walk_caches(bool no_walk_caches)
{
	return !no_walk_caches && !getenv("NUPP_NO_CODE_CACHE");
}

static bool want_vm_probe(const struct lj_target *t)
{
	return !t->ngs && !getenv("NUPP_NO_VM_PROBE");
}

static __u64 gc_cycle_site(const struct lj_target *t)
{
	return lj_target__sym(t, "lj_gc_separateudata");
}

static __u64 vm_start_site(const struct lj_target *t)
{
	return lj_target__func(t, "luaL_openlibs");
}

void sampler__open_probes_early(const struct sampler_opts *o, const struct lj_target *t)
{
	if (want_walk_caches(o->no_walk_caches))
		open_probe_early(t, gc_cycle_site(t));
	if (want_vm_probe(t))
		open_probe_early(t, vm_start_site(t));
}

void sampler__close_early_probes(void)
{
	for (int i = 0; i < nearly_probes; i++)
		close(early_probes[i].fd);
	nearly_probes = 0;
}

/* The early probe opened for tg at at, taken from the list; -1 if none. */
static int take_early_probe(const struct target *tg, __u64 at)
{
	for (int i = 0; i < nearly_probes; i++) {
		if (early_probes[i].pid != tg->pid || early_probes[i].at != at)
			continue;
		int fd = early_probes[i].fd;

		early_probes[i] = early_probes[--nearly_probes];
		return fd;
	}
	return -1;
}

/* A uprobe running prog at the entry of tg's function at address at: the
 * early one opened for it, else one opened now after the same checks; NULL
 * when there is none. */
static struct uprobe *probe_entry(struct bpf_program *prog, struct target *tg, __u64 at)
{
	int fd = at ? take_early_probe(tg, at) : -1;
	struct bpf_link *link;
	__u64 off;

	if (fd >= 0) {
		link = bpf_program__attach_perf_event(prog, fd);
		if (!link)
			close(fd);
		return uprobe__adopt(link);
	}
	off = entry_probe_offset(tg->t, at);
	return off ? uprobe__attach(prog, tg->pid, tg->t->path, off, 0) : NULL;
}

/* The sampler caches what it learns of call sites and functions (struct
 * lj_memo in bpf/lj_walk.h) once a probe on the atomic phase of LuaJIT's GC
 * cycles retires those caches; a build without that site, or whose site
 * does not decode as a function's entry, is walked without them
 * (NUPP_NO_CODE_CACHE=1 and sampler_opts.no_walk_caches ask for that too). */
void enable_walk_caches(struct sampler *s, struct target *tg)
{
	__u64 epoch = 0;

	if (!want_walk_caches(s->no_walk_caches))
		return;
	tg->gc_probe = probe_entry(s->skel->progs.on_gc_cycle, tg, gc_cycle_site(tg->t));
	if (!tg->gc_probe)
		return;
	/* Unique to this attachment: entries of an earlier process with the
	 * same pid, or of another, can never match. */
	while (!epoch)
		if (getrandom(&epoch, sizeof(epoch), 0) != sizeof(epoch))
			epoch = ((__u64)getpid() << 32 | (__u32)tg->pid) ^ (__u64)time(NULL) << 20;
	tg->proc.gc_epoch = tg->seen_epoch = epoch;
	tg->seen_at = monotonic_s();
}

/* A process with no VM yet (launched, or a child that executed LuaJIT) gets
 * a uprobe on luaL_openlibs, its VM's first call: from then on the sampler
 * knows the thread's VM without waiting for a scan (on_openlibs). A build
 * that does not export it, or whose entry does not verify, waits for the
 * scan. */
void watch_new_vm(struct sampler *s, struct target *tg)
{
	if (!want_vm_probe(tg->t))
		return;
	tg->vm_probe = probe_entry(s->skel->progs.on_openlibs, tg, vm_start_site(tg->t));
}

/* A --waits probe of tg kept (0), or -1 when probe is NULL. */
static int keep_wait_probe(struct target *tg, struct uprobe *probe)
{
	if (!probe || tg->nwait_probes == TARGET_WAIT_PROBES) {
		uprobe__detach(probe);
		return -1;
	}
	tg->wait_probes[tg->nwait_probes++] = probe;
	return 0;
}

/* Drop tg's --waits probes from the n-th on. */
static void drop_wait_probes(struct target *tg, int n)
{
	while (tg->nwait_probes > n)
		uprobe__detach(tg->wait_probes[--tg->nwait_probes]);
}

/* A uprobe running prog at the conditional jump at vaddr in the VM's
 * coroutine fast functions (vm_coroutines__find decoded it), told by its
 * cookie that the coroutine is in rbp. */
static struct uprobe *probe_vm_site(struct bpf_program *prog, struct target *tg, __u64 vaddr)
{
	__u64 off = lj_target__file_offset(tg->t, vaddr);

	return off ? uprobe__attach(prog, tg->pid, tg->t->path, off, NUPP_CO_IN_RBP) : NULL;
}

/* --waits: each way a coroutine yields and is resumed, probed in pairs
 * (bpf/offcpu.h): from C, lua_yield and lua_resume (verified entries);
 * from Lua, coroutine.yield, coroutine.resume and coroutine.wrap's
 * functions in the VM. A way whose probes do not all attach is left out,
 * and said. */
void watch_coroutine_waits(struct sampler *s, struct target *tg)
{
	const struct lj_target *t = tg->t;
	__u64 yield = lj_target__func(t, "lua_yield"), resume = lj_target__func(t, "lua_resume");
	struct bpf_program *on_yield = s->skel->progs.on_yield, *on_resume = s->skel->progs.on_resume;
	struct vm_coroutine_sites vm;
	int n = tg->nwait_probes;

	if (!yield || !resume || keep_wait_probe(tg, probe_entry(on_yield, tg, yield)) ||
	    keep_wait_probe(tg, probe_entry(on_resume, tg, resume))) {
		drop_wait_probes(tg, n);
		say__note("note: PID %d: no coroutine waits through the C API: %s", tg->pid,
			  yield && resume ? "the entry of lua_yield or lua_resume did not verify"
					  : "its LuaJIT exports no lua_yield or lua_resume");
	}
	n = tg->nwait_probes;
	if (vm_coroutines__find(t->path, &t->layout, &vm)) {
		say__note("note: PID %d: no coroutine waits through coroutine.yield: %s", tg->pid,
			  vm.why);
		return;
	}
	if (keep_wait_probe(tg, probe_vm_site(on_yield, tg, vm.yield)) ||
	    keep_wait_probe(tg, probe_vm_site(on_resume, tg, vm.resume)) ||
	    keep_wait_probe(tg, probe_vm_site(on_resume, tg, vm.wrap))) {
		drop_wait_probes(tg, n);
		say__note("note: PID %d: no coroutine waits through coroutine.yield: cannot probe "
			  "its interpreter: %s", tg->pid, strerror(errno));
	}
}

/* Each GC cycle costs the target a uprobe hit (7-20 us here: the probed
 * instruction is emulated or single-stepped). A target that runs more cycles
 * than this (a small heap under a high allocation rate) is walked without the
 * caches instead: they would be retired before they pay, and the probe's hits
 * would cost it up to 0.5 % of a core. */
#define GC_CYCLES_MAX_PER_S	250

/* Programs often allocate most at start-up: a target found running GC cycles
 * too often is tried again with the caches after a while, 2 s the first
 * time, twice as long after each failure, at most a minute. A try costs it
 * the probe's hits until the next poll. */
#define CACHES_RETRY_S		2.0
#define CACHES_RETRY_MAX_S	60.0

static void retry_walk_caches(struct sampler *s, struct target *tg)
{
	/* As at attach: the probe first, then a new epoch, so that no entry
	 * of before matches and every entry at the new one was found in use
	 * after any atomic phase the probe missed (bpf/lj_walk.h). */
	enable_walk_caches(s, tg);
	if (!tg->gc_probe) {
		tg->caches_backoff = 0;		/* the probe will not attach: stop trying */
		return;
	}
	SET_LIVE(s, tg, gc_epoch, tg->proc.gc_epoch);
	/* Code freed while they were off was never forgotten: the
	 * symbolizer's caches start anew with the epoch. */
	symbolizer__flush(tg->sym);
	tracemap__flush(tg->tm);
	if (getenv("NUPP_VERBOSE"))
		fprintf(stderr, "sampler: pid %d walk caches on again\n", tg->pid);
}

/* A GC cycle of a target swept since the symbolizer's caches were filled
 * (its GC epoch moved to epoch): what they hold by the addresses of
 * prototypes may now belong to other code. A stack the ring announced is
 * named at the epoch of its sample (struct nupp_new_slot), the names known
 * then; one found otherwise may still read the new code, a window that
 * frequent polls keep short. */
void forget_freed_code(struct sampler *s, struct target *tg, __u64 epoch)
{
	double t = monotonic_s();

	if (!tg->proc.gc_epoch || epoch == tg->seen_epoch) {
		tg->seen_at = t;
		return;
	}
	if ((epoch - tg->seen_epoch) > GC_CYCLES_MAX_PER_S * (t - tg->seen_at) + 10) {
		/* Epoch 0 first: no walk trusts the caches once the probe goes. */
		SET_LIVE(s, tg, gc_epoch, 0);
		disable_walk_caches(tg, true);
		tg->caches_backoff = tg->caches_backoff ? tg->caches_backoff * 2 : CACHES_RETRY_S;
		if (tg->caches_backoff > CACHES_RETRY_MAX_S)
			tg->caches_backoff = CACHES_RETRY_MAX_S;
		tg->caches_retry_at = t + tg->caches_backoff;
		if (getenv("NUPP_VERBOSE"))
			fprintf(stderr, "sampler: pid %d runs GC cycles too often; no walk caches "
				"for %.0f s\n", tg->pid, tg->caches_backoff);
	}
	tg->seen_epoch = epoch;
	tg->seen_at = t;
	symbolizer__flush(tg->sym);
	tracemap__flush(tg->tm);
	keymap__free(&s->rendered);	/* of every target: few are kept */
}

/* The GC epoch of live target tg now, the walk caches retried first when
 * they are off and it is time. */
__u64 current_epoch(struct sampler *s, struct target *tg)
{
	if (!tg->proc.gc_epoch && tg->caches_backoff && monotonic_s() >= tg->caches_retry_at)
		retry_walk_caches(s, tg);
	return __atomic_load_n(&s->procs[tg->slot].gc_epoch, __ATOMIC_RELAXED);
}

