// SPDX-License-Identifier: MIT
/*
 * dump.c - `nupp-bpf dump -p PID`: the Lua stack of every VM of a process,
 * now, once, without stopping it.
 *
 * For a server that hangs: its threads mostly sleep in a system call, where
 * no timer sample fires, so the stacks are read from the process's memory.
 * A thread blocked in a system call cannot change its Lua stack, and the VM
 * it runs left its state in memory when it called out (L->base synced,
 * g->vmstate C, GC or a trace's number). Which thread runs a VM is known
 * from the VM's innermost C frame (L->cframe), which lies in the native
 * stack of the thread inside it: the stack that holds the blocked thread's
 * stack pointer (/proc/PID/task/TID/syscall, read without stopping it). The
 * walk is the sampler's own (bpf/lj_walk.h) over process_vm_readv, and the
 * names are symbolize.c's, as in every other output. A walk is repeated
 * when the thread left its system call meanwhile.
 *
 * A VM whose thread is not blocked runs: its stack changes under any read,
 * and in the interpreter its base is only in a register. Those VMs are
 * sampled, for a few ms, by the BPF sampler (user/sampler/sampler.c), which walks
 * a stack as it is at an instant; the stack shown is the one sampled most
 * often in that window, and the output says how often. A VM found by
 * neither (a thread not running Lua, or not sampled in time) says so, with
 * what its memory holds when that can be trusted.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "dump.h"
#include "dump_int.h"
#include "profile/formats.h"
#include "luajit/lj_target.h"
#include "base/procmem.h"
#include "profile/profile.h"
#include "sampler/sampler.h"
#include "base/say.h"
#include "luajit/symbolize.h"
#include "sampler/tracemap.h"
#include "base/util.h"

/* The walk reads the target through LJ_READ, which has no context: the
 * process being dumped. */
static pid_t walk_pid;
#define LJ_READ(dst, n, addr) procmem__read(walk_pid, dst, n, addr)
#include "lj_walk.h"

#define SAMPLE_WINDOW_MS	100	/* longest wait for samples of running VMs */
#define SAMPLES_WANTED		8	/* per running VM, to stop the window early */
#define WALK_TRIES		3	/* walks of a blocked thread's VM that changed */
#define NATIVE_SCAN		4096	/* bytes of a blocked thread's native stack
					 * searched for its return into a trace */

/* ---------------------------------------------------------------------------
 * Threads, as /proc shows them without stopping them
 */


/* The first line of /proc/PID/task/TID/NAME into buf; its length or -1. */
static int task_file(pid_t pid, pid_t tid, const char *name, char *buf, size_t size)
{
	char path[96];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", pid, tid, name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fgets(buf, size, f) ? (int)strcspn(buf, "\n") : -1;
	fclose(f);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* /proc/PID/task/TID/syscall: "running", or the call's number, its six
 * arguments, sp and pc; "-1 sp pc" outside a call. The kernel answers for a
 * thread that is not running only, and never stops it to. */
static void read_syscall(pid_t pid, struct dthread *th)
{
	char buf[512], *p;
	unsigned long long v[8];
	int n = 0;

	th->blocked = false;
	if (task_file(pid, th->tid, "syscall", buf, sizeof(buf)) <= 0 || !strncmp(buf, "running", 7))
		return;
	th->nr = strtol(buf, &p, 10);
	while (n < 8 && *p) {
		char *end;

		v[n] = strtoull(p, &end, 0);
		if (end == p)
			break;
		p = end;
		n++;
	}
	if (th->nr == -1 && n == 2) {
		th->sp = v[0], th->pc = v[1];
		th->blocked = true;
	} else if (n == 8) {
		th->sp = v[6], th->pc = v[7];
		th->blocked = true;
	}
}

/* The thread's name and state letter, from /proc/PID/task/TID/stat. */
static void read_stat(pid_t pid, struct dthread *th)
{
	char buf[512], *open, *close;

	th->state = '?';
	if (task_file(pid, th->tid, "stat", buf, sizeof(buf)) <= 0)
		return;
	open = strchr(buf, '(');
	close = strrchr(buf, ')');
	if (!open || !close || close < open || !close[1] || !close[2])
		return;
	snprintf(th->comm, sizeof(th->comm), "%.*s", (int)(close - open - 1), open + 1);
	th->state = close[2];
}

/* The mapping that holds each blocked thread's stack pointer. */
static void find_stacks(struct dump *d)
{
	struct proc_mapping m;
	FILE *f = procmem__maps_open(d->pid);

	while (f && procmem__maps_next(f, &m))
		for (int i = 0; i < d->nthreads; i++)
			if (d->threads[i].blocked && d->threads[i].sp >= m.start &&
			    d->threads[i].sp < m.end) {
				d->threads[i].stack_lo = m.start;
				d->threads[i].stack_hi = m.end;
			}
	if (f)
		fclose(f);
}

static int read_threads(struct dump *d)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int cap = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", d->pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir))) {
		struct dthread *th;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (ARRAY_ROOM(d->threads, d->nthreads, cap, 16)) {
			closedir(dir);
			errno = ENOMEM;
			return -1;
		}
		th = &d->threads[d->nthreads++];
		*th = (struct dthread){ .tid = atoi(e->d_name), .nr = -1, .vm = -1 };
		read_stat(d->pid, th);
		read_syscall(d->pid, th);
		if (th->blocked && task_file(d->pid, th->tid, "wchan", th->wchan,
					     sizeof(th->wchan)) > 0 && !strcmp(th->wchan, "0"))
			th->wchan[0] = '\0';
	}
	closedir(dir);
	find_stacks(d);
	return 0;
}

/* ---------------------------------------------------------------------------
 * VMs, from memory
 */

static int rd64(pid_t pid, __u64 addr, __u64 *v)
{
	return procmem__read(pid, v, 8, addr);
}

/* The fields of VM g that say where its stack is and what it runs. */
static int read_vm(struct dump *d, struct dvm *vm)
{
	const struct lj_layout *lj = &d->t.layout;
	__u64 L;

	if (procmem__read(d->pid, &vm->vmstate, 4, vm->g + lj->g_vmstate) ||
	    rd64(d->pid, vm->g + lj->g_cur_L, &L) || rd64(d->pid, vm->g + lj->g_jit_base, &vm->jit_base))
		return -1;
	vm->L = L & LJ_GCVMASK;
	if (!vm->L || rd64(d->pid, vm->L + lj->L_base, &vm->base) ||
	    rd64(d->pid, vm->L + lj->L_stack, &vm->stack) ||
	    rd64(d->pid, vm->L + lj->L_maxstack, &vm->maxstack) ||
	    rd64(d->pid, vm->L + lj->L_cframe, &vm->cframe))
		return -1;
	vm->stack &= LJ_GCVMASK;
	vm->maxstack &= LJ_GCVMASK;
	vm->cframe &= LJ_CFRAME_RAWMASK;
	return 0;
}

/* The VM's innermost C frame lies in the native stack of the thread inside
 * it, above where that thread is blocked. */
static void find_owner(struct dump *d, struct dvm *vm)
{
	if (!vm->cframe)
		return;
	for (int i = 0; i < d->nthreads; i++) {
		struct dthread *th = &d->threads[i];

		if (th->blocked && vm->cframe >= th->sp && vm->cframe < th->stack_hi) {
			vm->thread = i;
			vm->thread_how = "stack";
			th->vm = vm - d->vms;
			return;
		}
	}
}

/* On trace, a thread blocked in a call the trace made (an FFI call) has the
 * return address into the trace's code on its native stack, above where it
 * is blocked: that position maps through the trace's snapshots as a sample
 * would (NUPP_PC_TRACE). 0 when none is found within NATIVE_SCAN bytes. */
static __u64 trace_pos_of(struct dump *d, const struct dvm *vm, const struct dthread *th)
{
	const struct lj_layout *lj = &d->t.layout;
	__u64 buf[NATIVE_SCAN / 8], traces, T, mcode = 0, GG = vm->g - lj->gg_g;
	__u32 szmcode = 0;
	size_t n = NATIVE_SCAN;

	if (!lj->tr_size || !th || !th->blocked)
		return 0;
	/* J->trace[n], a GCRef: 8 bytes in a GC64 build. */
	if (rd64(d->pid, GG + lj->gg_j + lj->J_trace, &traces) ||
	    rd64(d->pid, (traces & LJ_GCVMASK) + 8 * (__u64)vm->vmstate, &T))
		return 0;
	T &= LJ_GCVMASK;
	if (!T || rd64(d->pid, T + lj->tr_mcode, &mcode) ||
	    procmem__read(d->pid, &szmcode, 4, T + lj->tr_szmcode) || !mcode)
		return 0;
	if (th->sp + n > th->stack_hi)
		n = th->stack_hi - th->sp;
	if (procmem__read(d->pid, buf, n, th->sp))
		return 0;
	for (size_t i = 0; i < n / 8; i++) {
		__s64 off = (__s64)(buf[i] - d->t.vm_lo);

		if (buf[i] > mcode && buf[i] <= mcode + szmcode && off == (__s32)off)
			return NUPP_PC_TRACE_MAKE(vm->vmstate, off);
	}
	return 0;
}

/* Walk VM vm's stack as its memory holds it, into frames (innermost first):
 * the frame count, -1 when it cannot be walked. */
static int walk_memory(struct dump *d, struct dvm *vm, struct nupp_frame *frames)
{
	const struct lj_layout *lj = &d->t.layout;
	struct lj_walk *w = &d->walk->w;
	__u64 base = vm->vmstate >= 0 ? vm->jit_base : vm->base, cf;

	if (base - 8 == vm->stack + 8) {
		snprintf(vm->note, sizeof(vm->note), "its Lua stack is empty");
		return 0;
	}
	if (base - 8 < vm->stack + 8 || base > vm->maxstack) {
		snprintf(vm->note, sizeof(vm->note), "its frame base lies outside its stack");
		return -1;
	}
	*w = (struct lj_walk){ .L = vm->L, .f = base - 8, .bot = vm->stack + 8, .max = NUPP_MAX_DEPTH };
	/* The leaf's pc: on trace where its code called out; in the GC, the
	 * JIT compiler or a helper, where the VM saved it (SAVE_PC); a C
	 * function has none. */
	if (vm->vmstate >= 0)
		w->pc = trace_pos_of(d, vm, vm->thread >= 0 ? &d->threads[vm->thread] : NULL);
	else if (vm->vmstate != LJ_VMST_C && vm->cframe &&
		 !rd64(d->pid, vm->cframe + LJ_CFRAME_OFS_PC, &cf))
		w->pc = cf & LJ_GCVMASK & ~(__u64)NUPP_CALL_MASK;
	while (!lj_walk_step(d->walk, lj))
		;
	if (w->err) {
		snprintf(vm->note, sizeof(vm->note), "its stack could not be walked: %s",
			 sampler__err_name(w->err - 1));
		return -1;
	}
	memcpy(frames, d->walk->frames, w->depth * sizeof(*frames));
	return w->depth;
}

static void frames_free(struct dvm *vm)
{
	for (int i = 0; i < vm->nframes; i++) {
		free(vm->frames[i].name);
		free(vm->frames[i].file);
	}
	vm->nframes = 0;
}

static int frame_set(struct dframe *f, const char *name, size_t len, const char *file,
		     enum profile_frame_kind kind, __u32 line, __u32 start_line)
{
	*f = (struct dframe){ .name = strndup(name, len), .file = strdup(file ? file : ""),
			      .kind = kind, .line = line, .start_line = start_line };
	return f->name && f->file ? 0 : -1;
}

/* Name frames[0..depth) into vm->frames, as every output names them. */
static int symbolize(struct dump *d, struct dvm *vm, const struct nupp_frame *in, int depth)
{
	static const enum profile_frame_kind kinds[] = {
		[SYM_KIND_LUA] = PROFILE_FRAME_LUA, [SYM_KIND_C] = PROFILE_FRAME_C,
		[SYM_KIND_BUILTIN] = PROFILE_FRAME_BUILTIN, [SYM_KIND_UNREAD] = PROFILE_FRAME_UNKNOWN,
	};
	struct nupp_frame mapped[2 * NUPP_MAX_DEPTH];
	struct sym_frame info[2 * NUPP_MAX_DEPTH];
	struct strbuf text = {};
	int shown, ret = 0;

	/* On trace: the frames inlined into it, when its position is known. */
	if (tracemap__expand(d->tm, vm->g, in, depth, mapped, 2 * NUPP_MAX_DEPTH, &depth) < 0)
		return -1;
	/* The outermost frame read only names the one above it when the walk
	 * stopped at its limit. */
	vm->truncated = d->walk->w.depth == NUPP_MAX_DEPTH;
	shown = depth - vm->truncated;
	if (shown > NUPP_MAX_DEPTH)
		shown = NUPP_MAX_DEPTH, vm->truncated = true;
	if (symbolizer__stack_info(d->sym, mapped, depth, shown, &text, info) < 0) {
		strbuf__free(&text);
		return -1;
	}
	/* info is outermost first; vm->frames innermost first. */
	for (int i = 0; i < shown && !ret; i++) {
		const struct sym_frame *sf = &info[shown - 1 - i];

		ret = frame_set(&vm->frames[i], text.buf + sf->off, sf->len,
				sf->kind == SYM_KIND_LUA ? sf->chunk : "", kinds[sf->kind],
				sf->line, sf->start_line);
		vm->nframes = i + 1;
	}
	strbuf__free(&text);
	return ret;
}

/* Is the thread still blocked where it was, and the VM as it was read? */
static bool unchanged(struct dump *d, struct dvm *vm, const struct dthread *th)
{
	struct dthread now = { .tid = th->tid };
	struct dvm again = { .g = vm->g };

	read_syscall(d->pid, &now);
	return now.blocked && now.nr == th->nr && now.sp == th->sp && !read_vm(d, &again) &&
	       again.vmstate == vm->vmstate && again.L == vm->L && again.base == vm->base &&
	       again.jit_base == vm->jit_base;
}

/* The stack of a VM whose thread is blocked, or that runs no Lua at all,
 * from memory. */
static int dump_from_memory(struct dump *d, struct dvm *vm)
{
	struct nupp_frame frames[NUPP_MAX_DEPTH];
	const struct dthread *th = vm->thread >= 0 ? &d->threads[vm->thread] : NULL;

	for (int tries = 0; tries < WALK_TRIES; tries++) {
		int n;

		vm->note[0] = '\0';
		if (tries && read_vm(d, vm))
			break;
		n = walk_memory(d, vm, frames);
		if (n >= 0 && (!th || unchanged(d, vm, th))) {
			vm->from = FROM_MEMORY;
			vm->state = nupp_state_of(vm->vmstate);
			return symbolize(d, vm, frames, n);
		}
		if (n >= 0)
			snprintf(vm->note, sizeof(vm->note), "its thread left the system call while "
				 "its stack was read, %d times", WALK_TRIES);
	}
	return 0;
}

/* ---------------------------------------------------------------------------
 * Running VMs, sampled
 */

/* The profile's frame name without the ":LINE" --lines puts after a Lua
 * frame whose line is known. */
static size_t name_len(const struct profile_frame *f)
{
	char suffix[16];
	size_t n = strlen(f->name), k;

	if (f->kind != PROFILE_FRAME_LUA || !f->line)
		return n;
	k = snprintf(suffix, sizeof(suffix), ":%u", f->line);
	return n > k && !strcmp(f->name + n - k, suffix) ? n - k : n;
}

/* The VM's stack sampled most often in the window. */
static int take_sampled(struct dump *d, struct dvm *vm, const struct profile *p)
{
	const struct profile_row *best = NULL;
	__u64 most = 0;

	for (size_t i = 0; i < p->nrows; i++) {
		const struct profile_row *r = &p->rows[i];
		__u64 n = profile_row__count(r);

		if (r->g != vm->g)
			continue;
		vm->of += n;
		if (n > most)
			most = n, best = r;
	}
	if (!best)
		return 0;
	vm->samples = most;
	vm->from = FROM_SAMPLE;
	vm->state = 0;		/* the state most of the stack's samples were in */
	for (int s = 1; s < NUPP_ST_MAX; s++)
		if (best->state[s] > best->state[vm->state])
			vm->state = s;
	for (int i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid == (pid_t)best->tid && d->threads[i].vm < 0) {
			vm->thread = i;
			vm->thread_how = "sample";
			d->threads[i].vm = vm - d->vms;
		}
	/* Rows are outermost first; vm->frames innermost first. */
	for (__u32 i = 0; i < best->nframes && i < NUPP_MAX_DEPTH; i++) {
		const struct profile_frame *f = &p->frames[best->frames[best->nframes - 1 - i]];

		if (frame_set(&vm->frames[i], f->name, name_len(f),
			      f->kind == PROFILE_FRAME_LUA ? f->file : "", f->kind, f->line,
			      f->start_line))
			return -1;
		vm->nframes = i + 1;
	}
	return 0;
}

/* Has every VM that runs Lua on no blocked thread a row in p? */
static bool all_sampled(const struct dump *d, const struct profile *p)
{
	for (int i = 0; i < d->nvms; i++) {
		size_t k = 0;

		if (d->vms[i].thread >= 0 || !d->vms[i].cframe)
			continue;
		while (k < p->nrows && p->rows[k].g != d->vms[i].g)
			k++;
		if (k == p->nrows)
			return false;
	}
	return true;
}

/* Sample the VMs no blocked thread holds: until there are SAMPLES_WANTED
 * samples for each and each has one, or the window ends. */
static int sample_running(struct dump *d, int want)
{
	const struct sampler_opts o = {
		.clock = SAMPLER_CLOCK_CPU, .freq_hz = 997, .depth = NUPP_MAX_SHOWN,
		.max_stacks = 256, .lines = true, .no_walk_caches = true,
	};
	struct sampler_stats st;
	struct profile p = {};
	struct sampler *s;
	double start;
	int ret = 0;

	s = sampler__open(&o, d->sample_why, sizeof(d->sample_why));
	if (!s)
		return 0;
	if (sampler__add_target(s, &d->t, NULL, d->sample_why, sizeof(d->sample_why))) {
		sampler__close(s);
		return 0;
	}
	start = 1e3 * monotonic_s();
	for (;;) {
		__u64 samples, stacks;
		bool late;

		usleep(2000);
		if ((ret = sampler__poll(s)))
			break;
		sampler__progress(s, &samples, &stacks);
		late = 1e3 * monotonic_s() - start >= SAMPLE_WINDOW_MS;
		if (samples < (__u64)want * SAMPLES_WANTED && !late)
			continue;
		/* Other threads' samples count too (a host's own, in no VM). */
		profile__free(&p);
		p = (struct profile){};
		if ((ret = sampler__collect(s, &p, &st)) || late || all_sampled(d, &p))
			break;
	}
	d->window_ms = (unsigned)(1e3 * monotonic_s() - start + 0.5);
	sampler__stop(s);
	for (int i = 0; i < d->nvms && !ret; i++)
		if (d->vms[i].from == FROM_NONE)
			ret = take_sampled(d, &d->vms[i], &p);
	profile__free(&p);
	sampler__close(s);
	return ret;
}

/* ---------------------------------------------------------------------------
 * The command
 */

/* A VM whose stack was neither read nor sampled. On a blocked thread: its
 * walk failed (the note says why), or it claims to interpret, whose frame
 * base only a register holds. A VM with no C frame runs no Lua (no call
 * into it is in progress): its stack was synced when the last call
 * returned, and is read. Any other one runs and was not sampled in time. */
static int dump_unknown(struct dump *d, struct dvm *vm)
{
	const char *why = d->sample_why[0] ? d->sample_why : "no sample of it";

	if (vm->thread >= 0 && !vm->note[0])
		snprintf(vm->note, sizeof(vm->note), "its thread is blocked but the VM interprets: "
			 "its frame base is in a register, not read");
	if (vm->thread >= 0)
		return 0;	/* a blocked thread's VM that could not be walked */
	if (vm->cframe) {
		snprintf(vm->note, sizeof(vm->note), "running, not sampled (%s)", why);
		return 0;
	}
	if (dump_from_memory(d, vm))
		return -1;
	if (!vm->note[0])
		snprintf(vm->note, sizeof(vm->note), "runs no Lua code now: no call into the VM "
			 "is in progress");
	return 0;
}

/* Every VM's stack and thread; 0, or -1 when out of memory. */
static int dump_all(struct dump *d)
{
	int running = 0;

	for (int i = 0; i < d->t.ngs; i++) {
		struct dvm *vm = &d->vms[d->nvms];

		*vm = (struct dvm){ .g = d->t.gs[i], .thread = -1 };
		if (read_vm(d, vm))
			continue;	/* gone since the scan */
		d->nvms++;
		vm->state = nupp_state_of(vm->vmstate);	/* until a sample says otherwise */
		find_owner(d, vm);
	}
	for (int i = 0; i < d->nvms; i++) {
		struct dvm *vm = &d->vms[i];

		if (vm->thread >= 0 && vm->vmstate != LJ_VMST_INTERP && dump_from_memory(d, vm))
			return -1;
		running += vm->thread < 0 && vm->cframe;
	}
	if (running && sample_running(d, running))
		return -1;
	for (int i = 0; i < d->nvms; i++)
		if (d->vms[i].from == FROM_NONE && dump_unknown(d, &d->vms[i]))
			return -1;
	return 0;
}

int dump__run(pid_t pid, bool json)
{
	struct dump *d = calloc(1, sizeof(*d));
	char err[1024];
	int ret = 1;

	if (!d || !(d->walk = calloc(1, sizeof(*d->walk)))) {
		say__error("out of memory");
		free(d);
		return 1;
	}
	d->t0 = 1e3 * monotonic_s();
	d->pid = walk_pid = pid;
	if (lj_target__open(&d->t, pid, err, sizeof(err))) {
		say__error("%s", err);
		goto out;
	}
	if (!d->t.ngs) {
		say__error("no LuaJIT VM found in PID %d%s%s", pid,
			       d->t.layout_why[0] ? ": " : "", d->t.layout_why);
		goto out;
	}
	d->sym = symbolizer__new(lj_target__build(&d->t), procmem__reader(&d->pid));
	d->tm = tracemap__new(lj_target__build(&d->t), procmem__reader(&d->pid), d->t.vm_lo,
			      d->t.vm_hi);
	if (!d->sym) {
		say__error("out of memory");
		goto out;
	}
	if (read_threads(d)) {
		say__error("cannot read the threads of PID %d: %s", pid, strerror(errno));
		goto out;
	}
	if (dump_all(d)) {
		say__error("out of memory");
		goto out;
	}
	if (json)
		dump__print_json(d, stdout);
	else
		dump__print_text(d, stdout);
	ret = fflush(stdout) ? 1 : 0;
out:
	for (int i = 0; i < d->nvms; i++)
		frames_free(&d->vms[i]);
	symbolizer__free(d->sym);
	tracemap__free(d->tm);
	free(d->threads);
	free(d->walk);
	free(d);
	return ret;
}
