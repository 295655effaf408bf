// SPDX-License-Identifier: MIT
/*
 * sampler.c - the sampling channel's userspace side (sampler.h).
 *
 * Loads bpf/sampler.bpf.c and starts its timers (cpu-clock events or the
 * scheduler tick); lists each target in the mapped procs map, changed only
 * in place, with its probes (sampler_probes.c: the GC-cycle probe that keeps
 * the walk caches sound, the VM-start probe); hands each new stack the
 * ring announces to stack_rows.c, which names it; and reads the counts table
 * in place into a profile.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <zlib.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "luajit/codemap.h"
#include "base/keymap.h"
#include "base/ksyms.h"
#include "base/procmem.h"
#include "sampler.h"
#include "describe.h"
#include "luajit/cfunc_names.h"
#include "base/libbpf_setup.h"
#include "sampler_int.h"
#include "sampler.skel.h"
#include "sampler_sweep.skel.h"	/* its ELF bytes alone */
#include "task_work.h"		/* NUPP_SWEEP_WALKS: the build's kernel has BPF task work */
#include "sampler_abi.h"
#include "luajit/symbolize.h"
#include "tracemap.h"
#include "base/util.h"
#include "zones/zones.h"


static const char *const err_names[NUPP_ERR_MAX] = {
	[NUPP_ERR_NO_VM] = "no VM on thread",
	[NUPP_ERR_NO_THREAD] = "bad current thread",
	[NUPP_ERR_BAD_BASE] = "bad frame base",
	[NUPP_ERR_BAD_FRAME] = "bad frame",
	[NUPP_ERR_READ] = "read fault",
	[NUPP_ERR_NO_FRAME] = "no frame",
	[NUPP_ERR_VM_CLOSED] = "VM closed",
	[NUPP_ERR_MAP_FULL] = "stack map full",
};

const char *sampler__err_name(int err)
{
	return err >= 0 && err < NUPP_ERR_MAX ? err_names[err] : "?";
}

/* The procs map as mapped: its slots one after another (an mmap-able
 * array's values are 8-byte aligned, as the struct's size is). */
_Static_assert(sizeof(struct nupp_proc) % 8 == 0, "procs slots are 8-byte aligned");
static size_t procs_bytes(void)
{
	return NUPP_MAX_PLACES * sizeof(struct nupp_proc);
}

static int on_new_slot(void *ctx, void *data, size_t size);

/* tag: a task event's nanoseconds over the period (own_event_sample()). */
static struct perf_event_attr cpu_clock_attr(const struct sampler *s, __u32 tag)
{
	return (struct perf_event_attr){
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(struct perf_event_attr),
		/* cpu-clock counts nanoseconds: a fixed period gives the asked
		 * rate from the first sample on, where freq mode adapts slowly. */
		.sample_period = s->period_ns + tag,
		/* An idle CPU runs no target: no program run there. */
		.exclude_idle = !s->task_events,
		/* A thread's event is copied to the threads and processes it
		 * starts (on_cpu_clock counts a process's own ones only). */
		.inherit = s->task_events,
	};
}

/* The off-CPU clock's event on a thread: every switch out of it runs
 * on_switch_out (bpf/offcpu.h). It counts in the scheduler, in the
 * kernel: kernel mode is not excluded. Copied to the threads and
 * processes the thread starts. */
static struct perf_event_attr switch_attr(void)
{
	return (struct perf_event_attr){
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CONTEXT_SWITCHES,
		.size = sizeof(struct perf_event_attr),
		.sample_period = 1,
		.inherit = 1,
	};
}

/* The program of a task event, run on the event fd: its link, which owns
 * fd; NULL with err said (fd closed). */
static struct bpf_link *link_event(struct sampler *s, int fd, const char *what, char *err,
				   size_t errsz)
{
	struct bpf_link *link = bpf_program__attach_perf_event(
		s->off_cpu ? s->skel->progs.on_switch_out : s->skel->progs.on_cpu_clock, fd);

	if (!link) {
		snprintf(err, errsz, "failed to attach sampler to %s: %s", what, strerror(errno));
		close(fd);
	}
	return link;
}

/* One cpu-clock event per CPU (--clock cpu): every busy CPU is
 * interrupted, the BPF program returns at once for all but the targets'. */
static int attach_cpu_clock(struct sampler *s, char *err, size_t errsz)
{
	struct perf_event_attr attr = cpu_clock_attr(s, 0);
	int ncpu = libbpf_num_possible_cpus();
	char what[32];

	s->links = calloc(ncpu, sizeof(*s->links));
	s->perf_fds = calloc(ncpu, sizeof(*s->perf_fds));
	if (!s->links || !s->perf_fds)
		return -ENOMEM;
	for (int cpu = 0; cpu < ncpu; cpu++) {
		int fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			if (errno == ENODEV)	/* CPU offline */
				continue;
			snprintf(err, errsz, "failed to open cpu-clock event on CPU %d: %s", cpu,
				 strerror(errno));
			return -1;
		}
		snprintf(what, sizeof(what), "CPU %d", cpu);
		if (!(s->links[s->nlinks] = link_event(s, fd, what, err, errsz)))
			return -1;
		s->perf_fds[s->nlinks++] = fd;	/* the link closes it */
	}
	return 0;
}

/* Close a process's task events (with the copies its threads inherited). */
static void close_task_events(struct evented *ev)
{
	for (int i = 0; i < ev->nlinks; i++)
		bpf_link__destroy(ev->links[i]);
	free(ev->links);
	ev->links = NULL;
	ev->nlinks = ev->cap = 0;
}

/* The events of process pid: where it is listed, with its tag; NULL when
 * it has none. A tag is the least no live listed process holds: periods
 * stay within a few nanoseconds of the rate's. */
static struct evented *evented_of(struct sampler *s, pid_t pid, const struct proc_stat *st)
{
	for (int i = 0; i < s->nevented; i++)
		if (s->evented[i].pid == pid && s->evented[i].start == st->start)
			return &s->evented[i];
	return NULL;
}

/* Close the events of process pid, or of every process listed that is gone
 * or whose pid another process has now (pid 0). */
static void close_gone_events(struct sampler *s, pid_t pid)
{
	struct proc_stat st;

	for (int i = 0; i < s->nevented; i++)
		if (pid ? s->evented[i].pid == pid :
			  procmem__stat(s->evented[i].pid, &st) || st.start != s->evented[i].start) {
			close_task_events(&s->evented[i]);
			s->evented[i--] = s->evented[--s->nevented];
		}
}

static __u32 free_tag(struct sampler *s)
{
	__u32 tag = 1;

	close_gone_events(s, 0);
	for (int i = 0; i < s->nevented; i++)
		if (s->evented[i].tag == tag) {
			tag++;
			i = -1;		/* again, from the start */
		}
	return tag;
}

/* Task events (--clock thread): a cpu-clock event on each thread of target
 * process pid, tagged with its own period (s->evented), once per process
 * (the off-CPU clock: a context-switch event, whose tag serves nothing):
 * it keeps its events across an exec. No other task is interrupted, where
 * per-CPU events interrupt every busy CPU of the machine; but each switch
 * of a target's thread stops and starts its timer (docs/lab-notes.md:
 * which costs more depends on the server). A thread started while the list
 * is read is started by one with an event already (and inherits it) or is
 * listed by the next pass. Its tag is set in its slot before its first
 * event opens. */
static int open_task_events(struct sampler *s, struct target *tg, char *err, size_t errsz)
{
	pid_t pid = tg->pid;
	struct perf_event_attr attr;
	struct proc_stat st;
	struct evented *ev;
	struct keymap done = {};	/* threads seen: a process may have thousands */
	int added = 1, ret = -1;
	__u32 tag;
	char path[64], what[48];

	if (procmem__stat(pid, &st))
		return 0;	/* gone: nothing to sample */
	if ((ev = evented_of(s, pid, &st))) {
		SET_LIVE(s, tg, events_tag, ev->tag);	/* executed another program */
		return 0;
	}
	tag = free_tag(s);	/* first: it drops the processes gone */
	if (ARRAY_ROOM(s->evented, s->nevented, s->evented_cap, 8)) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	ev = &s->evented[s->nevented++];
	*ev = (struct evented){ .pid = pid, .start = st.start, .tag = tag };
	SET_LIVE(s, tg, events_tag, ev->tag);
	attr = s->off_cpu ? switch_attr() : cpu_clock_attr(s, ev->tag);
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	for (int pass = 0; added && pass < 16; pass++) {
		DIR *d = opendir(path);
		struct dirent *e;

		added = 0;
		if (!d)
			break;		/* gone */
		while ((e = readdir(d))) {
			pid_t tid = atoi(e->d_name);
			int fd;

			if (tid <= 0 || keymap__get(&done, &tid, sizeof(tid)) >= 0)
				continue;
			if (keymap__put(&done, &tid, sizeof(tid), 1)) {
				snprintf(err, errsz, "out of memory");
				closedir(d);
				goto out;
			}
			fd = syscall(__NR_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
			if (fd < 0) {
				if (errno == ESRCH)
					continue;	/* the thread exited */
				snprintf(err, errsz, "failed to open a %s event on thread %d: %s",
					 s->off_cpu ? "context-switch" : "cpu-clock", tid,
					 strerror(errno));
				closedir(d);
				goto out;
			}
			snprintf(what, sizeof(what), "thread %d", tid);
			if (ARRAY_ROOM(ev->links, ev->nlinks, ev->cap, 4)) {
				close(fd);
				snprintf(err, errsz, "out of memory");
				closedir(d);
				goto out;
			}
			if (!(ev->links[ev->nlinks] = link_event(s, fd, what, err, errsz))) {
				closedir(d);
				goto out;
			}
			ev->nlinks++;
			added++;
		}
		closedir(d);
	}
	ret = 0;
out:
	keymap__free(&done);
	return ret;
}

/* Address of the kernel's scheduler tick handler, the hrtimer callback the
 * tick runs in: tick_sched_timer before Linux 6.11, where tick_nohz_handler
 * is the low-resolution mode's clockevent handler, never an hrtimer's;
 * since 6.11, tick_nohz_handler, the two merged into one, and no
 * tick_sched_timer. /proc/timer_list names the callback of every armed
 * hrtimer, the tick's among them on a busy CPU (this one, reading it): the
 * name it lists is looked up in /proc/kallsyms, whose pass stops there
 * (a fifth of the file, ~10 ms of the kernel's time where the whole file
 * takes ~45 ms). Listed neither, the tick is no hrtimer (low-resolution
 * mode): 0. Without /proc/timer_list, tick_sched_timer wherever it exists. */
static __u64 tick_handler(void)
{
	static const char *const names[] = { "tick_sched_timer", "tick_nohz_handler" };
	static __u64 addr;	/* looked up once */
	static bool known;
	char line[256], listed[64];
	__u64 addrs[2];
	int which = -1;
	FILE *f;

	if (known)
		return addr;
	known = true;
	if (!(f = fopen("/proc/timer_list", "re"))) {
		if (!ksyms__lookup(names, addrs, 2))
			addr = addrs[0] ? addrs[0] : addrs[1];
		return addr;
	}
	while (which < 0 && fgets(line, sizeof(line), f))
		for (int i = 0; i < 2 && which < 0; i++) {
			snprintf(listed, sizeof(listed), ", %s,", names[i]);
			if (strstr(line, listed))
				which = i;
		}
	fclose(f);
	if (which >= 0 && ksyms__lookup(&names[which], addrs, 1) == 0)
		addr = addrs[0];
	return addr;
}

/* CONFIG_HZ of the running kernel, from its configuration (the file
 * Debian installs in /boot, or the kernel's own /proc/config.gz; gzopen
 * reads either); 0 when neither says. */
static unsigned kernel_hz(void)
{
	char path[2][128] = { "", "/proc/config.gz" }, line[256];
	static unsigned hz;	/* read once: a clock's choice, period and gap all ask */
	static bool known;
	struct utsname u;

	if (known)
		return hz;
	known = true;
	if (!uname(&u))
		snprintf(path[0], sizeof(path[0]), "/boot/config-%s", u.release);
	for (int i = 0; i < 2 && !hz; i++) {
		gzFile f = path[i][0] ? gzopen(path[i], "rb") : NULL;

		if (!f)
			continue;
		while (!hz && gzgets(f, line, sizeof(line)))
			if (sscanf(line, "CONFIG_HZ=%u", &hz) != 1)
				hz = 0;
		gzclose(f);
	}
	return hz;
}

/* The time asked between two samples of a thread, -F or -i; 0 if neither. */
static __u64 asked_period_ns(const struct sampler_opts *o)
{
	return o->freq_hz ? 1000000000ULL / o->freq_hz : (__u64)o->period_us * 1000;
}

/* The scheduler tick's period, 0 when CONFIG_HZ cannot be read. */
static __u64 tick_period_ns(void)
{
	unsigned hz = kernel_hz();

	return hz ? 1000000000ULL / hz : 0;
}

/* Whether the tick can serve o's rate by itself (--clock tick thins the
 * ticks of targets to it): the rate is at most CONFIG_HZ, the tick handler
 * is known, and no CPU stops its tick while it runs one task (nohz_full=,
 * where the tick would see almost nothing of a busy target). */
static bool tick_serves(const struct sampler_opts *o)
{
	__u64 tick = tick_period_ns(), asked = asked_period_ns(o);
	char line[64] = "";
	FILE *f = fopen("/sys/devices/system/cpu/nohz_full", "r");

	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	}
	/* "(null)" or an empty line when no CPU is nohz_full. */
	if (line[0] && line[0] != '\n' && line[0] != '(')
		return false;
	return tick && asked >= tick && tick_handler();
}

enum sampler_clock sampler__clock_for(const struct sampler_opts *o)
{
	if (o->clock != SAMPLER_CLOCK_AUTO)
		return o->clock;
	return tick_serves(o) ? SAMPLER_CLOCK_TICK : SAMPLER_CLOCK_CPU;
}

/* The time between two samples of a thread: the cpu-clock's period, or, on
 * the scheduler tick, the rate asked (each tick without one). */
static __u64 period_ns(const struct sampler_opts *o)
{
	if (o->clock == SAMPLER_CLOCK_TICK)
		return asked_period_ns(o) ? asked_period_ns(o) : tick_period_ns();
	if (o->clock == SAMPLER_CLOCK_OFF_CPU)
		return 1000;	/* a count is a microsecond waited */
	if (o->clock == SAMPLER_CLOCK_ALLOC)
		return o->alloc_mean;	/* profile.h: the mean bytes between two samples */
	return asked_period_ns(o);
}

bool sampler__off_cpu(const struct sampler *s)
{
	return s->off_cpu;
}

bool sampler__alloc(const struct sampler *s)
{
	return s->alloc;
}

/* What s's counts are. */
static enum profile_measure measure(const struct sampler *s)
{
	return s->off_cpu ? PROFILE_OFF_CPU : s->alloc ? PROFILE_ALLOC : PROFILE_SAMPLES;
}

__u64 sampler__period_ns(const struct sampler *s)
{
	return s->period_ns;
}

#define ALIGN16(n)	(((n) + 15) & ~(size_t)15)

/* The userspace buffers, sized by --depth and --max-stacks, in two blocks:
 * one stack's (frames, info, mapped, mkey; s->frames owns it) and the
 * tables by slot (slot_row, known, slot_map; s->slot_row owns it), whose
 * zeroed pages stay untouched until used. */
static int alloc_buffers(struct sampler *s, const struct sampler_opts *o)
{
	size_t per_stack = o->depth + 1 + NUPP_MAX_DEPTH;	/* frames, mapped ones included */
	size_t info = ALIGN16(per_stack * sizeof(*s->info));
	size_t mapped = ALIGN16(per_stack * sizeof(*s->mapped));
	size_t frames;
	char *stack, *slots;

	/* Stacks hold exactly --depth frames and the caller of the outermost. */
	s->frames_size = (o->depth + 1) * sizeof(struct nupp_frame);
	frames = ALIGN16(s->frames_size);
	/* Twice the slots asked for, so that probing stays short. */
	for (s->table_len = 16; s->table_len < 2 * (size_t)o->max_stacks; s->table_len *= 2)
		;
	stack = calloc(1, frames + info + mapped + sizeof(*s->mkey) + mapped);
	slots = calloc(s->table_len, sizeof(*s->slot_row) + sizeof(*s->known) + sizeof(*s->slot_map));
	if (!stack || !slots) {
		free(stack);
		free(slots);
		return -1;
	}
	s->frames = (struct nupp_frame *)stack;
	s->info = (struct sym_frame *)(stack + frames);
	s->mapped = (struct nupp_frame *)(stack + frames + info);
	s->mkey = (struct mapped_key *)(stack + frames + info + mapped);
	s->slot_row = (long *)slots;
	s->known = (__u32 *)(s->slot_row + s->table_len);
	s->slot_map = (__u8 *)(s->known + s->table_len);
	return 0;
}

/* The sampler's object with the sweep of --off-cpu -F (the Makefile's
 * sampler_sweep.bpf.o): the same source, so the same maps and globals in
 * the same places, and one program more, which the sampler's skeleton
 * opens by name. Its kfunc makes libbpf read the kernel's whole BTF, for
 * its CO-RE relocations too (the build's cut of it covers the sampler's). */
static struct sampler_bpf *open_with_sweep(void)
{
	struct bpf_object_open_opts opts = *libbpf_setup__open_opts();
	struct sampler_bpf *obj = calloc(1, sizeof(*obj));
	int err = -ENOMEM;

	opts.btf_custom_path = NULL;
	if (!obj || (err = sampler_bpf__create_skeleton(obj)))
		goto fail;
	obj->skeleton->data = sampler_sweep_bpf__elf_bytes(&obj->skeleton->data_sz);
	if ((err = bpf_object__open_skeleton(obj->skeleton, &opts)))
		goto fail;
	return obj;
fail:
	sampler_bpf__destroy(obj);
	errno = -err;
	return NULL;
}

static int open_object(struct sampler *s, char *err, size_t errsz)
{
	s->skel = s->sweep ? open_with_sweep() : sampler_bpf__open_opts(libbpf_setup__open_opts());
	if (!s->skel) {
		snprintf(err, errsz, "failed to open the sampler BPF object: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* --clock tick at the rate asked: the mean gap, in ticks × 1024, between
 * two samples of the ticks of targets (tick_taken() in the BPF program). */
static int configure_tick_rate(struct sampler *s, const struct sampler_opts *o, char *err,
			       size_t errsz)
{
	__u64 tick = tick_period_ns(), asked = asked_period_ns(o);

	if (!asked)
		return 0;
	if (!tick) {
		snprintf(err, errsz, "--clock tick at a rate needs the tick's: CONFIG_HZ is in "
			 "neither /boot/config-RELEASE nor /proc/config.gz");
		return -1;
	}
	if (asked < tick) {
		snprintf(err, errsz, "--clock tick samples at most CONFIG_HZ (%llu) times a "
			 "second; ask -F %llu or less, or another --clock",
			 1000000000ULL / tick, 1000000000ULL / tick);
		return -1;
	}
	s->skel->rodata->tick_gap_1024 = (__u32)((asked * 1024 + tick / 2) / tick);
	return 0;
}

/* Set what the object is loaded with: its constants, the sizes of its
 * maps, the one timer program of --clock. */
static int configure_object(struct sampler *s, const struct sampler_opts *o, char *err, size_t errsz)
{
	if (o->clock == SAMPLER_CLOCK_TICK && !(s->skel->rodata->tick_fn = tick_handler())) {
		snprintf(err, errsz, "cannot find the scheduler tick's hrtimer handler "
			 "(tick_sched_timer or tick_nohz_handler in /proc/timer_list and "
			 "/proc/kallsyms); take --clock cpu");
		return -1;
	}
	if (o->clock == SAMPLER_CLOCK_TICK && configure_tick_rate(s, o, err, errsz))
		return -1;
	s->skel->rodata->walk_turns = 2 * (o->depth + 1) < NUPP_MAX_DEPTH ? 2 * (o->depth + 1)
									   : NUPP_MAX_DEPTH;
	s->skel->rodata->leaf_pc = o->lines;
	s->task_events = o->clock == SAMPLER_CLOCK_THREAD ||
			 (o->clock == SAMPLER_CLOCK_OFF_CPU && !s->sweep);
	s->skel->rodata->task_events = o->clock == SAMPLER_CLOCK_THREAD;
	s->skel->rodata->period_ns = s->period_ns;
	bpf_map__set_max_entries(s->skel->maps.counts, s->table_len);
	bpf_map__set_value_size(s->skel->maps.stacks, s->frames_size);
	bpf_map__set_max_entries(s->skel->maps.stacks, o->max_stacks);
	bpf_program__set_autoload(s->skel->progs.on_cpu_clock,
				  o->clock == SAMPLER_CLOCK_CPU || o->clock == SAMPLER_CLOCK_THREAD);
	bpf_program__set_autoload(s->skel->progs.on_tick, o->clock == SAMPLER_CLOCK_TICK);
	bpf_program__set_autoload(s->skel->progs.on_switch_out, s->off_cpu && !s->sweep);
	bpf_program__set_autoload(s->skel->progs.on_thread_exit, s->off_cpu && !s->sweep);
	bpf_program__set_autoload(s->skel->progs.sweep_off_cpu, s->sweep);
	if (s->sweep && !NUPP_SWEEP_WALKS) {
		snprintf(err, errsz, "--off-cpu -F sweeps with BPF task work (Linux 6.18), which "
			 "this kernel lacks; take --off-cpu without -F");
		return -1;
	}
	bpf_program__set_autoload(s->skel->progs.on_yield, s->coroutine_waits);
	bpf_program__set_autoload(s->skel->progs.on_resume, s->coroutine_waits);
	uprobe__prepare(s->skel->progs.on_gc_cycle);
	uprobe__prepare(s->skel->progs.on_openlibs);
	uprobe__prepare(s->skel->progs.on_yield);
	uprobe__prepare(s->skel->progs.on_resume);
	bpf_program__set_autoload(s->skel->progs.on_alloc, s->alloc);
	if (!s->alloc) {	/* preallocated: ~11 MB of kernel memory */
		bpf_map__set_max_entries(s->skel->maps.alloc_live, 1);
		bpf_map__set_max_entries(s->skel->maps.alloc_objects, 1);
	}
	if (s->alloc)
		return allocs__configure(s, o, err, errsz);
	return o->clock == SAMPLER_CLOCK_OFF_CPU ? waits__configure(s, o, err, errsz) : 0;
}

/* Load it, and map what userspace reads and writes in place: the counts
 * table, the targets' entries; the ring of new slots. */
static int load_object(struct sampler *s, char *err, size_t errsz)
{
	int ret = sampler_bpf__load(s->skel);
	void *m;

	if (ret) {
		snprintf(err, errsz, "failed to load the sampler BPF program: %s", strerror(-ret));
		return -1;
	}
	if (libbpf_setup__learn_pid_view(s->skel->progs.learn_pid_view, &s->skel->bss->view_learned,
					 err, errsz))
		return -1;
	s->table_bytes = s->table_len * sizeof(*s->table);
	m = mmap(NULL, s->table_bytes, PROT_READ, MAP_SHARED, bpf_map__fd(s->skel->maps.counts), 0);
	if (m == MAP_FAILED) {
		snprintf(err, errsz, "failed to map the sampler's counts: %s", strerror(errno));
		return -1;
	}
	s->table = m;
	m = mmap(NULL, procs_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
		 bpf_map__fd(s->skel->maps.procs), 0);
	if (m == MAP_FAILED) {
		snprintf(err, errsz, "failed to map the sampler's procs: %s", strerror(errno));
		return -1;
	}
	s->procs = m;
	if (s->alloc) {
		m = mmap(NULL, s->table_len * sizeof(__u64), PROT_READ, MAP_SHARED,
			 bpf_map__fd(s->skel->maps.alloc_objects), 0);
		if (m == MAP_FAILED) {
			snprintf(err, errsz, "failed to map the sampler's allocation counts: %s",
				 strerror(errno));
			return -1;
		}
		s->alloc_objects = m;
	}
	s->new_slots = ring_buffer__new(bpf_map__fd(s->skel->maps.new_slots), on_new_slot, s, NULL);
	if (!s->new_slots) {
		snprintf(err, errsz, "failed to open the sampler's ring buffer: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Start the timers (the scheduler tick, or a cpu-clock event per CPU) and
 * the exec hook. */
/* s's clock as one program attached where its section says (a
 * tracepoint): its only link. */
static int attach_one(struct sampler *s, struct bpf_program *prog, const char *where,
			       char *err, size_t errsz)
{
	if (!(s->links = calloc(1, sizeof(*s->links)))) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	if (!(s->links[0] = bpf_program__attach(prog))) {
		snprintf(err, errsz, "failed to attach to %s: %s", where, strerror(errno));
		return -1;
	}
	s->nlinks = 1;
	return 0;
}

static int attach(struct sampler *s, const struct sampler_opts *o, char *err, size_t errsz)
{
	if (o->clock == SAMPLER_CLOCK_TICK) {
		if (attach_one(s, s->skel->progs.on_tick, "the scheduler tick", err, errsz))
			return -1;
	} else if (s->sweep) {
		/* The sweeps (waits.c): an iterator per target, as it comes. */
	} else if (o->clock == SAMPLER_CLOCK_OFF_CPU) {
		/* Context-switch events on the targets' threads
		 * (open_task_events), and their exits (offcpu.h). */
		if (attach_one(s, s->skel->progs.on_thread_exit, "sched_process_exit", err, errsz))
			return -1;
	} else if (o->clock == SAMPLER_CLOCK_ALLOC) {
		/* Probes on each target's allocators (allocs__watch). */
	} else if (!s->task_events && attach_cpu_clock(s, err, errsz)) {
		return -1;
	}
	s->exec_link = bpf_program__attach(s->skel->progs.on_exec);
	if (!s->exec_link) {
		snprintf(err, errsz, "failed to attach to sched_process_exec: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The sampler as a channel of a session (channel.h). */
static int ch_add_target(struct channel *c, const struct lj_target *t, struct zones *z,
			 char *err, size_t errsz)
{
	return sampler__add_target((struct sampler *)c, t, z, err, errsz);
}

static void ch_remove_target(struct channel *c, const struct lj_target *t)
{
	sampler__remove_target((struct sampler *)c, t);
}

static bool ch_target_execed(struct channel *c, pid_t pid)
{
	return sampler__target_execed((struct sampler *)c, pid);
}

static int ch_set_zones(struct channel *c, const struct lj_target *t, struct zones *z)
{
	return sampler__set_zones((struct sampler *)c, t, z);
}

static int ch_fd(const struct channel *c)
{
	return sampler__fd((const struct sampler *)c);
}

static int ch_drain(struct channel *c)
{
	return sampler__drain((struct sampler *)c);
}

static void ch_poll(struct channel *c)
{
	sampler__poll((struct sampler *)c);
}

static void ch_pause(struct channel *c, bool paused)
{
	sampler__pause((struct sampler *)c, paused);
}

static void ch_close(struct channel *c)
{
	sampler__close((struct sampler *)c);
}

#define SAMPLER_CHANNEL(channel_name) {					\
	.name = channel_name,							\
	.add_target = ch_add_target,						\
	.remove_target = ch_remove_target,					\
	.target_execed = ch_target_execed,					\
	.set_zones = ch_set_zones,						\
	.fd = ch_fd,								\
	.drain = ch_drain,							\
	.poll = ch_poll,							\
	.pause = ch_pause,							\
	.close = ch_close,							\
}
/* One channel by what it counts: the sampler on the CPU, and off it. */
static const struct channel_ops sampler_channel = SAMPLER_CHANNEL("sampler");
static const struct channel_ops off_cpu_channel = SAMPLER_CHANNEL("off-cpu");
static const struct channel_ops alloc_channel = SAMPLER_CHANNEL("alloc");

struct channel *sampler__channel(struct sampler *s)
{
	return s ? &s->channel : NULL;
}

struct sampler *sampler__open(const struct sampler_opts *asked, char *err, size_t errsz)
{
	struct sampler_opts clocked = *asked, *o = &clocked;
	struct sampler *s = calloc(1, sizeof(*s));

	o->clock = sampler__clock_for(asked);

	if (s)
		s->channel = (struct channel){ o->clock == SAMPLER_CLOCK_OFF_CPU ? &off_cpu_channel
					       : o->clock == SAMPLER_CLOCK_ALLOC ? &alloc_channel
										  : &sampler_channel,
					       { .streams = true } };
	if (!s || alloc_buffers(s, o)) {
		snprintf(err, errsz, "out of memory");
		sampler__close(s);
		return NULL;
	}
	s->period_ns = period_ns(o);
	s->off_cpu = o->clock == SAMPLER_CLOCK_OFF_CPU;
	/* A rate asked of the off-CPU clock: sweeps at it, not every switch. */
	s->sweep = s->off_cpu && asked_period_ns(o);
	s->sweep_period_ns = s->sweep ? asked_period_ns(o) : 0;
	pthread_mutex_init(&s->sweep_lock, NULL);
	s->coroutine_waits = s->off_cpu && o->coroutine_waits;
	s->alloc = o->clock == SAMPLER_CLOCK_ALLOC;
	s->tick = o->clock == SAMPLER_CLOCK_TICK;
	s->weight = 1;
	s->max_shown = o->depth;
	s->lines = o->lines;
	s->dumpstack_names = o->dumpstack_names;
	s->no_walk_caches = o->no_walk_caches;
	if (open_object(s, err, errsz) || configure_object(s, o, err, errsz) ||
	    load_object(s, err, errsz) || attach(s, o, err, errsz) ||
	    (s->sweep && waits__start_sweeps(s, err, errsz))) {
		sampler__close(s);
		return NULL;
	}
	return s;
}

/* A target's memory as its symbolizer reads it: from what the ring record
 * of the stack being named captured (struct nupp_capture) when that holds
 * all of it, else from the process. */
static int target_mem_read(void *ctx, void *dst, size_t n, __u64 addr)
{
	const struct target *tg = ctx;

	for (int i = 0; tg->naming && i < NUPP_CAPTURES; i++) {
		const struct nupp_capture *c = &tg->naming->captured[i];
		__u64 at = addr - c->addr;

		if (c->addr && addr >= c->addr && c->len <= NUPP_CAPTURE_MAX && at <= c->len &&
		    n <= c->len - at) {
			memcpy(dst, c->bytes + at, n);
			return 0;
		}
	}
	return procmem__read(tg->pid, dst, n, addr);
}

/* A target's own state: its probes, its symbolizer and maps; the walk
 * caches' probe too, when destroy_caches. */
static void free_target(struct target *tg, bool destroy_caches)
{
	if (destroy_caches)
		disable_walk_caches(tg, false);
	uprobe__detach(tg->vm_probe);
	while (tg->nwait_probes)
		uprobe__detach(tg->wait_probes[--tg->nwait_probes]);
	allocs__unwatch(tg);
	symbolizer__free(tg->sym);
	cfunc_names__free(tg->cnames);
	codemap__free(tg->code);
	tracemap__free(tg->tm);
	free(tg);
}

void sampler__close(struct sampler *s)
{
	if (!s)
		return;
	sampler__stop(s);	/* the timers and the exec hook */
	free(s->links);
	free(s->perf_fds);
	free(s->evented);
	sampler_bpf__destroy(s->skel);
	for (int i = 0; i < s->ntargets; i++)
		free_target(s->targets[i], true);
	free(s->targets);
	ring_buffer__free(s->new_slots);
	if (s->table)
		munmap(s->table, s->table_bytes);
	if (s->procs)
		munmap(s->procs, procs_bytes());
	if (s->alloc_objects)
		munmap(s->alloc_objects, s->table_len * sizeof(__u64));
	keymap__free(&s->seen);
	keymap__free(&s->rendered);
	waits__free(s);
	profile__free(&s->rows);
	free(s->frames);	/* with info, mapped and mkey */
	free(s->slot_row);	/* with known and slot_map */
	free(s);
}

/* Write a target's entry of the procs map, before it is listed. */
static int configure(struct sampler *s, struct target *tg)
{
	return bpf_map__update_elem(s->skel->maps.procs, &tg->slot, sizeof(tg->slot), &tg->proc,
				    sizeof(tg->proc), BPF_ANY);
}

/* List a configured target for the sampler: once, so that a slot the
 * kernel tombstoned at an exec (on_exec) is never brought back. */
static int enlist(struct sampler *s, struct target *tg)
{
	__u32 tgid = tg->pid;

	if (tg->slot >= NUPP_MAX_TARGETS)
		return bpf_map__update_elem(s->skel->maps.more_targets, &tgid, sizeof(tgid),
					    &tg->slot, sizeof(tg->slot), BPF_ANY);
	__atomic_store_n(&s->skel->bss->target_tgid[tg->slot], tgid, __ATOMIC_RELEASE);
	return 0;
}

/* Unlist a target: its pid matches nothing from now on. */
static void unlist(struct sampler *s, struct target *tg)
{
	__u32 tgid = tg->pid, slot;

	if (tg->slot < NUPP_MAX_TARGETS) {
		__atomic_store_n(&s->skel->bss->target_tgid[tg->slot], NUPP_TGID_GONE,
				 __ATOMIC_RELEASE);
		return;
	}
	/* Gone already if the process executed another program (on_exec). */
	if (!bpf_map__lookup_elem(s->skel->maps.more_targets, &tgid, sizeof(tgid), &slot,
				  sizeof(slot), 0) && slot == tg->slot)
		bpf_map__delete_elem(s->skel->maps.more_targets, &tgid, sizeof(tgid), 0);
}

int sampler__describe(const struct lj_target *t, const struct symbolizer *sym,
		      struct nupp_proc *proc, char *err, size_t errsz)
{
	__u64 code_lo[NUPP_CODE_RANGES], code_hi[NUPP_CODE_RANGES];
	int ncode;

	if (describe__layout(&t->layout, sym, proc)) {
		snprintf(err, errsz, "the LuaJIT layout of PID %d spreads the VM's fields wider "
			 "than the sampler reads at once", t->pid);
		return -1;
	}
	ncode = lj_target__code_near(t->pid, t->vm_lo, code_lo, code_hi, NUPP_CODE_RANGES);
	proc->vm_lo = t->vm_lo;
	proc->vm_hi = t->vm_hi;
	proc->g = t->ngs == 1 ? t->gs[0] : 0;
	for (int i = 0; i < ncode; i++)
		proc->code[i] = (struct nupp_code_range){ code_lo[i], code_hi[i] };
	return 0;
}

int sampler__add_target(struct sampler *s, const struct lj_target *t, struct zones *z,
			char *err, size_t errsz)
{
	struct target *tg;

	if (s->ntargets == NUPP_MAX_PLACES) {
		snprintf(err, errsz, "too many target processes (at most %d)", NUPP_MAX_PLACES);
		return -1;
	}
	if (ARRAY_ROOM(s->targets, s->ntargets, s->cap, 8)) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	tg = calloc(1, sizeof(*tg));
	if (!tg) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	tg->slot = s->ntargets;
	tg->t = t;
	tg->pid = t->pid;
	tg->zones = z;
	tg->sym = symbolizer__new(lj_target__build(t), (struct mem_reader){ target_mem_read, tg });
	tg->code = codemap__new(t->pid);
	tg->cnames = tg->code ? cfunc_names__new(t->pid, tg->code) : NULL;
	if (!tg->sym || !tg->code || !tg->cnames) {
		snprintf(err, errsz, "out of memory");
		free_target(tg, false);
		return -1;
	}
	if (sampler__describe(t, tg->sym, &tg->proc, err, errsz)) {
		free_target(tg, false);
		return -1;
	}
	/* What the sampler's settings add to the process's description. */
	tg->proc.max_frames = s->frames_size / sizeof(struct nupp_frame);
	tg->proc.counts_mask = s->table_len - 1;
	tg->proc.slot = s->ntargets;
	tg->proc.zone_cur = z ? zones__current_addr(z) : 0;
	symbolizer__set_lines(tg->sym, s->lines);
	if (!s->dumpstack_names)
		symbolizer__set_cfunc_names(tg->sym, tg->cnames);
	/* NULL for a build whose layout has no trace fields (or when
	 * NUPP_NO_TRACE_MAP=1 asks so): its compiled samples keep the trace's
	 * base frame as their leaf. */
	if (!getenv("NUPP_NO_TRACE_MAP"))
		tg->tm = tracemap__new(lj_target__build(t), procmem__reader(&tg->pid), t->vm_lo,
					 t->vm_hi);
	if (configure(s, tg) || enlist(s, tg)) {
		snprintf(err, errsz, "failed to configure PID %d: %s", t->pid, strerror(errno));
		free_target(tg, false);
		return -1;
	}
	if (t->ngs)
		tg->vm_known_at = 1;
	s->targets[s->ntargets++] = tg;
	/* Enlisted first: its samples count from its first event's on. */
	if (s->task_events && open_task_events(s, tg, err, errsz))
		return -1;
	/* Sampled from now on; walked with the caches once their probe is on.
	 * Attaching a uprobe can take a while (it waits for any uprobe being
	 * removed, ~0.1 s each), and sampling need not wait for it. */
	watch_new_vm(s, tg);
	enable_walk_caches(s, tg);
	if (s->coroutine_waits)
		watch_coroutine_waits(s, tg);
	if (s->alloc)
		allocs__watch(s, tg);
	if (tg->gc_probe)
		SET_LIVE(s, tg, gc_epoch, tg->proc.gc_epoch);
	if (s->sweep && waits__sweep_target(s, tg, err, errsz))
		return -1;
	return 0;
}

int sampler__refresh_target(struct sampler *s, const struct lj_target *t)
{
	struct target *tg = target_of(s, t->pid);

	if (!tg)
		return -ESRCH;
	/* Read before the sampler knows the VM: a sample counted in between
	 * stays unresolved rather than be called a thread in no VM. */
	if (t->ngs && !tg->vm_known_at)
		tg->vm_known_at = __atomic_load_n(&s->procs[tg->slot].vmless, __ATOMIC_ACQUIRE) + 1;
	SET_LIVE(s, tg, g, t->ngs == 1 ? t->gs[0] : 0);
	if (s->alloc)
		allocs__watch(s, tg);
	return 0;
}

__u64 sampler__vmless(struct sampler *s, pid_t pid)
{
	struct target *tg = target_of(s, pid);

	return tg ? __atomic_load_n(&s->procs[tg->slot].vmless, __ATOMIC_ACQUIRE) : 0;
}

void sampler__before_vm(struct sampler *s, pid_t pid, __u64 vmless)
{
	struct target *tg = target_of(s, pid);

	if (tg)
		tg->before_vm = vmless;
}

void sampler__remove_target(struct sampler *s, const struct lj_target *t)
{
	struct target *tg = target_of(s, t->pid);

	if (!tg)
		return;
	tg->gone = true;
	unlist(s, tg);
	/* Its probes and events serve no process now; kept to the session's
	 * end they held two files each and a uprobe's registration, a few
	 * for every worker a long --children session saw come and go
	 * (test_gone_childrens_probes_and_events_are_closed). Its symbolizer
	 * stays for its stacks not yet named. */
	disable_walk_caches(tg, true);
	uprobe__detach_aside(tg->vm_probe);
	while (tg->nwait_probes)
		uprobe__detach_aside(tg->wait_probes[--tg->nwait_probes]);
	tg->vm_probe = NULL;
	allocs__unwatch(tg);
	waits__unsweep_target(s, tg);
	close_gone_events(s, t->pid);
}

bool sampler__target_execed(struct sampler *s, pid_t pid)
{
	struct target *tg = target_of(s, pid);

	if (!tg || !__atomic_load_n(&s->skel->bss->target_execed[tg->slot],
				    __ATOMIC_ACQUIRE))
		return false;
	/* Stacks seen before the exec, while the symbolizer still knows the
	 * process as it was (its caches; its memory is the new program's). */
	sampler__poll(s);
	sampler__remove_target(s, tg->t);
	/* The GC probe would fire in a new image that maps the same file,
	 * next to the one the new target attaches. */
	disable_walk_caches(tg, false);
	tg->caches_backoff = 0;
	return true;
}

int sampler__set_zones(struct sampler *s, const struct lj_target *t, struct zones *z)
{
	struct target *tg = target_of(s, t->pid);

	if (!tg)
		return -ESRCH;
	tg->zones = z;
	SET_LIVE(s, tg, zone_cur, zones__current_addr(z));
	return 0;
}

/* The files' code near the interpreter, into the target's entry (see
 * nupp_proc.code). */
static void set_code_ranges(struct sampler *s, struct target *tg)
{
	__u64 lo[NUPP_CODE_RANGES], hi[NUPP_CODE_RANGES];
	int n = lj_target__code_near(tg->pid, tg->t->vm_lo, lo, hi, NUPP_CODE_RANGES);

	for (int i = 0; i < NUPP_CODE_RANGES; i++) {
		SET_LIVE(s, tg, code[i].lo, i < n ? lo[i] : 0);
		SET_LIVE(s, tg, code[i].hi, i < n ? hi[i] : 0);
	}
}

void sampler__refresh_code(struct sampler *s, const struct lj_target *t)
{
	struct target *tg = target_of(s, t->pid);

	if (tg)
		set_code_ranges(s, tg);
}

int sampler__slow_down(struct sampler *s)
{
	__u64 period;

	if (s->off_cpu || s->alloc || s->weight >= SAMPLER_WEIGHT_MAX ||
	    (!s->tick && !s->task_events && (!s->perf_fds || !s->nlinks)))
		return -ENOTSUP;
	period = s->period_ns * s->weight * 2;
	/* The tick's thinning (tick_taken()) doubles with weight alone. Task
	 * events keep their periods, which tell whose they are: the program
	 * keeps one sample in weight (own_event_sample()). */
	for (int i = 0; i < s->nlinks && !s->tick && !s->task_events; i++)
		if (ioctl(s->perf_fds[i], PERF_EVENT_IOC_PERIOD, &period))
			return -errno;
	s->weight *= 2;
	__atomic_store_n(&s->skel->data->weight, s->weight, __ATOMIC_RELEASE);
	return s->weight;
}

unsigned sampler__weight(const struct sampler *s)
{
	return s->weight;
}

void sampler__pause(struct sampler *s, bool paused)
{
	s->skel->bss->paused = paused;
}

void sampler__stop(struct sampler *s)
{
	waits__stop_sweeps(s);
	for (int i = 0; i < s->nlinks; i++)
		bpf_link__destroy(s->links[i]);
	s->nlinks = 0;
	for (int i = 0; i < s->nevented; i++)
		close_task_events(&s->evented[i]);
	bpf_link__destroy(s->exec_link);
	s->exec_link = NULL;
}


static int on_new_slot(void *ctx, void *data, size_t size)
{
	const struct nupp_new_slot *e = data;
	size_t head = offsetof(struct nupp_new_slot, frames);

	if (size < head || e->nframes > (size - head) / sizeof(e->frames[0]))
		return 0;
	return see_slot(ctx, e->slot, e);
}

int sampler__drain(struct sampler *s)
{
	int ret, n;

	/* The ring first: its stacks are named at their own epochs. */
	ret = n = ring_buffer__consume(s->new_slots);
	if (ret < 0)
		return ret;
	for (int i = 0; i < s->ntargets; i++)
		if (!s->targets[i]->gone)
			forget_freed_code(s, s->targets[i], current_epoch(s, s->targets[i]));
	/* The ring was full at some point: find the slots it missed. */
	if (__atomic_exchange_n(&s->skel->bss->new_slots_lost, 0, __ATOMIC_ACQ_REL))
		for (__u32 idx = 0; idx < s->table_len; idx++)
			if ((ret = see_slot(s, idx, NULL)))
				return ret;
	return n;
}

int sampler__fd(const struct sampler *s)
{
	return ring_buffer__epoll_fd(s->new_slots);
}

int sampler__poll(struct sampler *s)
{
	int ret;

	for (int i = 0; i < s->ntargets; i++) {
		if (s->targets[i]->gone)
			continue;
		codemap__age(s->targets[i]->code);
		tracemap__poll(s->targets[i]->tm);
	}
	if (s->off_cpu)
		waits__poll(s);
	ret = sampler__drain(s);
	return ret < 0 ? ret : 0;
}

/* Sum a per-CPU counter. */
static __u64 counter(struct sampler *s, __u32 idx)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 vals[ncpu], sum = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.counters), &idx, vals))
		return 0;
	for (int i = 0; i < ncpu; i++)
		sum += vals[i];
	return sum;
}

/* Samples of the targets so far: every one is counted once, in its
 * stack's slot or in a counter. */
static __u64 samples_so_far(struct sampler *s)
{
	__u64 n = 0;

	for (size_t k = 0; k < s->nknown; k++)
		for (int i = 0; i < NUPP_ST_MAX; i++)
			n += __atomic_load_n(&s->table[s->known[k]].state[i], __ATOMIC_RELAXED);
	for (__u32 i = 0; i < NUPP_CNT_MAX; i++)
		n += counter(s, i);
	return n;
}

void sampler__progress(struct sampler *s, __u64 *samples, __u64 *stacks)
{
	*samples = samples_so_far(s);
	*stacks = s->seen.used;
}

/* Add every row of s to p, with its frames; 0 or -1 when out of memory. */
static int copy_rows(struct sampler *s, struct profile *p)
{
	long *id = malloc((s->rows.nframes + 1) * sizeof(*id));	/* in s -> in p */
	__u32 ids[NUPP_MAX_DEPTH];
	int ret = -1;

	if (!id)
		return -1;
	for (size_t i = 0; i < s->rows.nframes; i++)
		if ((id[i] = profile__frame(p, &s->rows.frames[i])) < 0)
			goto out;
	for (size_t i = 0; i < s->rows.nrows; i++) {
		const struct profile_row *r = &s->rows.rows[i];
		long at;

		for (__u32 k = 0; k < r->nframes; k++)
			ids[k] = id[r->frames[k]];
		if ((at = profile__add(p, r->pid, r->tid, r->g, r->zone, ids, r->nframes)) < 0)
			goto out;
		memcpy(p->rows[at].state, r->state, sizeof(r->state));
		p->rows[at].alloc = r->alloc;
		p->rows[at].unreadable = r->unreadable;
	}
	p->period_ns = s->period_ns;
	p->measure = measure(s);
	ret = 0;
out:
	free(id);
	return ret;
}

/* Tell apart tg's samples that found no VM (in the order counted): before
 * its process had one (before_vm, outside Lua), then, until the sampler knew
 * its VM, samples a VM it could not name may have run (unresolved), then
 * those of threads that run no Lua. Once the process's VM is known, a
 * thread's VM is found by DISPATCH or the register that holds it, by the
 * thread's last one or luaL_openlibs's probe (bpf/sampler.bpf.c, find_vm):
 * a thread where none of them names one runs the host's own code. */
static void vmless_split(struct sampler *s, struct target *tg, struct sampler_stats *st)
{
	const struct nupp_proc *p = &s->procs[tg->slot];
	__u64 named = __atomic_load_n(&p->vmless_named, __ATOMIC_ACQUIRE);
	__u64 vmless = __atomic_load_n(&p->vmless, __ATOMIC_ACQUIRE);
	__u64 known = tg->vm_known_at;

	/* Those before luaL_openlibs ran before any Lua code, whatever the
	 * scans saw (on_openlibs); after it, the process had a VM known. */
	if (named && named - 1 > tg->before_vm)
		tg->before_vm = named - 1;
	if (named && (!known || named < known))
		known = named;
	st->before_vm += tg->before_vm;
	if (known && vmless > known - 1)
		st->thread_no_vm += vmless - (known - 1 > tg->before_vm ? known - 1 : tg->before_vm);
}

struct profile *sampler__counts(struct sampler *s, struct sampler_stats *st)
{
	__u64 no_vm;

	memset(st, 0, sizeof(*st));
	if (sampler__poll(s))
		return NULL;
	/* Rows are sums: one key may sit in two slots, and keys that render
	 * alike share a row. */
	for (size_t i = 0; i < s->rows.nrows; i++)
		memset(s->rows.rows[i].state, 0, sizeof(s->rows.rows[i].state));
	/* Off the CPU, the slots' stacks are the waits' Lua side: rows are
	 * by wait, with its kernel side as their leaf. First: a slot it sees
	 * for the first time is then among those the stats count. */
	if (s->off_cpu && waits__rows(s, st))
		return NULL;
	for (size_t k = 0; k < s->nknown; k++) {
		const struct nupp_stack_slot *slot = &s->table[s->known[k]];
		long row = s->slot_row[s->known[k]] - SLOT_SEEN;
		__u64 c[NUPP_ST_MAX], n = 0;

		for (int i = 0; i < NUPP_ST_MAX; i++)
			n += c[i] = __atomic_load_n(&slot->state[i], __ATOMIC_RELAXED);
		st->samples += n;
		if (slot->key.truncated)
			st->truncated += n;
		if (s->slot_map[s->known[k]] == TRACEMAP_IN_VM)
			st->trace_in_vm += c[NUPP_ST_COMPILED];
		else
			st->trace_compiled += c[NUPP_ST_COMPILED];
		if (s->slot_map[s->known[k]] == TRACEMAP_MAPPED)
			st->trace_mapped += c[NUPP_ST_COMPILED];
		else if (s->slot_map[s->known[k]] == TRACEMAP_UNMAPPED)
			st->trace_unmapped += c[NUPP_ST_COMPILED];
		else if (s->slot_map[s->known[k]] == TRACEMAP_GONE)
			st->trace_gone += c[NUPP_ST_COMPILED];
		if (row < 0) {
			st->unsymbolized += n;
			continue;
		}
		if (s->rows.rows[row].unreadable)
			st->unreadable += n;
		for (int i = 0; i < NUPP_ST_MAX && !s->off_cpu; i++)
			s->rows.rows[row].state[i] += c[i];
	}
	if (getenv("NUPP_VERBOSE")) {
		fprintf(stderr, "sampler: %zu kernel stacks, %zu mapped stacks rendered\n",
			s->seen.used, s->rendered.used);
		for (int i = 0; i < s->ntargets; i++)
			if (s->targets[i]->tm)
				fprintf(stderr, "sampler: pid %d: %zu traces held, %zu bytes\n",
					s->targets[i]->pid, tracemap__traces(s->targets[i]->tm),
					tracemap__bytes(s->targets[i]->tm));
	}
	if (s->alloc && allocs__rows(s, st))
		return NULL;
	st->paused = counter(s, NUPP_CNT_PAUSED);
	st->weight = s->weight;
	st->samples += st->paused;
	for (int i = 0; i < NUPP_ERR_MAX; i++)
		st->samples += st->unresolved[i] = counter(s, NUPP_CNT_ERR + i);
	for (int i = 0; i < s->ntargets; i++)
		vmless_split(s, s->targets[i], st);
	/* The per-target counts may run ahead of the counter read above. */
	no_vm = st->before_vm + st->thread_no_vm;
	st->unresolved[NUPP_ERR_NO_VM] -= no_vm < st->unresolved[NUPP_ERR_NO_VM] ?
					  no_vm : st->unresolved[NUPP_ERR_NO_VM];
	return &s->rows;
}

int sampler__collect(struct sampler *s, struct profile *p, struct sampler_stats *st)
{
	if (!sampler__counts(s, st))
		return -ENOMEM;
	return copy_rows(s, p) ? -ENOMEM : 0;
}

int sampler__take(struct sampler *s, struct profile *p, struct sampler_stats *st)
{
	s->taking = true;	/* the last read: waits still under way count too */
	if (!sampler__counts(s, st))
		return -ENOMEM;
	*p = s->rows;
	p->period_ns = s->period_ns;
	p->measure = measure(s);
	s->rows = (struct profile){ 0 };
	return 0;
}
