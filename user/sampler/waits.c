// SPDX-License-Identifier: MIT
/*
 * waits.c - the sampler's off-CPU clock, its kernel side (bpf/offcpu.h):
 * where the scheduler's code lies, the rate of walks, and the rows of the
 * waits, each a Lua stack (a slot's row) with the wait's system call and
 * wait channel as its leaf frame.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "base/ksyms.h"
#include "base/util.h"
#include "sampler_int.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD	O_EXCL		/* Linux 6.9: a pidfd of a thread */
#endif

static const char *const syscall_names[] = {
#include "syscall_names.h"
};

/* What a wait's row is made of: a Lua stack's row and its kernel side. */
struct wait_row_key {
	long row;
	__s32 syscall;
	__u32 preempted;
	__u64 wchan;
};

int waits__configure(struct sampler *s, const struct sampler_opts *o, char *err, size_t errsz)
{
	if (!(s->ksyms = ksyms__load())) {
		snprintf(err, errsz, "cannot read /proc/kallsyms: %s", strerror(errno));
		return -1;
	}
	s->skel->rodata->sched_text_lo = ksyms__addr(s->ksyms, "__sched_text_start");
	s->skel->rodata->sched_text_hi = ksyms__addr(s->ksyms, "__sched_text_end");
	if (!s->skel->rodata->sched_text_lo || !s->skel->rodata->sched_text_hi) {
		snprintf(err, errsz, "cannot find the scheduler's code (__sched_text_start) in "
			 "/proc/kallsyms: are kernel addresses hidden (kptr_restrict)?");
		return -1;
	}
	s->skel->rodata->min_block_ns = (__u64)o->min_block_us * 1000;
	s->skel->rodata->include_preempted = o->include_preempted;
	return 0;
}

/* Walks of switching threads a second, at most: a walk and its kernel
 * stack cost a switch ~2.5 us (kernel-notes/offcpu.md), so these cost the
 * targets at most 5 ms of CPU a second. Above, one switch in a power of two
 * is walked and counts for as many: an unbiased estimate of each stack's
 * time, whose error shrinks with the waits it sees. */
#define WALKS_PER_S_MAX		2000
#define SWITCH_EVERY_MAX	1024

/* The sweeper: reads the sweep iterator at jittered intervals (uniform
 * between half and one and a half of the period, so that no workload runs
 * in step with it), each sweep charging a waiting thread the time since
 * the sweep before. Its own thread: the session's loop wakes far less
 * often, and a sweep must not wait behind a collection. */
static void *sweeper(void *arg)
{
	struct sampler *s = arg;
	__u64 seed = (__u64)getpid() * 0x9e3779b97f4a7c15ULL ^ (__u64)(monotonic_s() * 1e9);
	double last = monotonic_s();
	char buf[64];

	while (!__atomic_load_n(&s->sweep_stop, __ATOMIC_ACQUIRE)) {
		double now, jitter;
		struct timespec ts;
		int fd;

		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;	/* xorshift64 */
		jitter = 0.5 + (double)(seed >> 11) / (double)(1ULL << 53);
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(s->sweep_period_ns * jitter);
		while (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		nanosleep(&ts, NULL);
		now = monotonic_s();
		__atomic_store_n(&s->skel->bss->sweep_ns, (__u64)((now - last) * 1e9),
				 __ATOMIC_RELEASE);
		last = now;
		pthread_mutex_lock(&s->sweep_lock);
		for (size_t i = 0; i < s->nsweep_links; i++) {
			if ((fd = bpf_iter_create(bpf_link__fd(s->sweep_links[i]))) < 0)
				continue;
			while (read(fd, buf, sizeof(buf)) > 0)
				;
			close(fd);
		}
		pthread_mutex_unlock(&s->sweep_lock);
	}
	return NULL;
}

int waits__sweep_target(struct sampler *s, struct target *tg, char *err, size_t errsz)
{
	union bpf_iter_link_info linfo = { .task.pid = tg->pid };
	LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &linfo, .link_info_len = sizeof(linfo));
	int ret = 0;

	if (!(tg->sweep_link = bpf_program__attach_iter(s->skel->progs.sweep_off_cpu, &opts))) {
		snprintf(err, errsz, "failed to make the off-CPU sweep's iterator over PID %d: %s",
			 tg->pid, strerror(errno));
		return -1;
	}
	pthread_mutex_lock(&s->sweep_lock);
	if (ARRAY_ROOM(s->sweep_links, s->nsweep_links, s->sweep_links_cap, 8))
		ret = -1;
	else
		s->sweep_links[s->nsweep_links++] = tg->sweep_link;
	pthread_mutex_unlock(&s->sweep_lock);
	if (ret) {
		bpf_link__destroy(tg->sweep_link);
		tg->sweep_link = NULL;
		snprintf(err, errsz, "out of memory");
	}
	return ret;
}

void waits__unsweep_target(struct sampler *s, struct target *tg)
{
	if (!tg->sweep_link)
		return;
	pthread_mutex_lock(&s->sweep_lock);
	for (size_t i = 0; i < s->nsweep_links; i++)
		if (s->sweep_links[i] == tg->sweep_link)
			s->sweep_links[i] = s->sweep_links[--s->nsweep_links];
	pthread_mutex_unlock(&s->sweep_lock);
	bpf_link__destroy(tg->sweep_link);
	tg->sweep_link = NULL;
}

int waits__start_sweeps(struct sampler *s, char *err, size_t errsz)
{
	sigset_t all, was;
	int ret;

	/* Signals (Ctrl-C, -d's end) go to the session's thread, whose poll
	 * they wake: the sweeper starts with them blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &was);
	ret = pthread_create(&s->sweeper, NULL, sweeper, s);
	pthread_sigmask(SIG_SETMASK, &was, NULL);

	if (ret) {
		snprintf(err, errsz, "cannot start the off-CPU sweeps: %s", strerror(ret));
		return -1;
	}
	s->sweeping = true;
	return 0;
}

void waits__stop_sweeps(struct sampler *s)
{
	if (!s->sweeping)
		return;
	__atomic_store_n(&s->sweep_stop, 1, __ATOMIC_RELEASE);
	pthread_join(s->sweeper, NULL);
	s->sweeping = false;
	for (size_t i = 0; i < s->nsweep_links; i++)
		bpf_link__destroy(s->sweep_links[i]);
	s->nsweep_links = 0;
	for (int i = 0; i < s->ntargets; i++)
		s->targets[i]->sweep_link = NULL;
}

/* Each second: the entries of sweep_seen whose thread is gone leave the
 * map (16,384 threads at most, over a session's life), their time not
 * charged yet (a thread killed while it waited) kept for the rows. */
static void prune_sweeps(struct sampler *s)
{
	int fd = bpf_map__fd(s->skel->maps.sweep_seen);
	double now = monotonic_s();
	struct nupp_sweep_seen e;
	__u32 tid, next;
	bool first = true;
	char path[48];

	if (now - s->pruned_at < 1.0)
		return;
	s->pruned_at = now;
	while (!bpf_map_get_next_key(fd, first ? NULL : &tid, &next)) {
		first = false;
		tid = next;
		if (bpf_map_lookup_elem(fd, &tid, &e) || !e.tid)
			continue;
		snprintf(path, sizeof(path), "/proc/%u/task/%u", e.pid, e.tid);
		if (!access(path, F_OK))
			continue;
		if (e.ns && s->ngone == s->gone_cap) {
			size_t cap = s->gone_cap ? 2 * s->gone_cap : 16;
			struct nupp_sweep_seen *more = realloc(s->gone, cap * sizeof(*more));

			if (!more)
				return;
			s->gone = more;
			s->gone_cap = cap;
		}
		if (e.ns)
			s->gone[s->ngone++] = e;
		bpf_map_delete_elem(fd, &tid);
	}
}

void waits__poll(struct sampler *s)
{
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(s->skel->maps.walked);
	__u64 vals[ncpu], seen = 0;
	double now = monotonic_s(), rate;
	__u32 zero = 0;
	unsigned every = 1;

	/* Every 0.1 s while every switch out is walked, each second once
	 * one in several is: at ~90,000 switches a second, a first second
	 * of walking them all cost a short run most of its slowdown
	 * (bench-offcpu). */
	if (s->sweep) {
		prune_sweeps(s);
		return;
	}
	if (s->switches_at && now - s->switches_at < (s->switch_every > 1 ? 1.0 : 0.1))
		return;
	if (bpf_map_lookup_elem(fd, &zero, vals))
		return;
	for (int i = 0; i < ncpu; i++)
		seen += vals[i];
	if (s->switches_at) {
		/* Switches out a second: those walked, each one of switch_every. */
		rate = (seen - s->switches_seen) * (double)(s->switch_every ? s->switch_every : 1) /
		       (now - s->switches_at);
		while (every < SWITCH_EVERY_MAX && rate / every > WALKS_PER_S_MAX)
			every *= 2;
		if (every != (s->switch_every ? s->switch_every : 1)) {
			s->switch_every = every;
			__atomic_store_n(&s->skel->data->switch_every, every, __ATOMIC_RELEASE);
		}
		if (every > s->switch_every_max)
			s->switch_every_max = every;
	}
	s->switches_seen = seen;
	s->switches_at = now;
}

void waits__free(struct sampler *s)
{
	keymap__free(&s->wait_rows);
	free(s->row_ns);
	free(s->gone);
	free(s->sweep_links);
	ksyms__free(s->ksyms);
}

/* The leaf frame of a wait: "read (pipe_read)", the system call and where
 * in the kernel it waited; "[preempted]" for a thread switched out
 * runnable. */
static long wait_frame(struct sampler *s, const struct nupp_wait_key *wk)
{
	const char *wchan = ksyms__name(s->ksyms, wk->wchan);
	const char *call = wk->syscall >= 0 &&
			   (size_t)wk->syscall < sizeof(syscall_names) / sizeof(*syscall_names) ?
			   syscall_names[wk->syscall] : NULL;
	char name[160], nr[24];
	struct profile_frame f = { .name = name, .file = "[kernel]", .kind = PROFILE_FRAME_KERNEL,
				   .addr = wk->wchan };

	if (wk->syscall >= 0 && !call && wk->syscall != NUPP_WAIT_COROUTINE) {
		snprintf(nr, sizeof(nr), "syscall %d", wk->syscall);
		call = nr;
	}
	if (wk->syscall == NUPP_WAIT_COROUTINE)
		snprintf(name, sizeof(name), "[coroutine wait]");
	else if (wk->preempted)
		snprintf(name, sizeof(name), "[preempted]");
	else if (call && wchan)
		snprintf(name, sizeof(name), "%s (%s)", call, wchan);
	else
		snprintf(name, sizeof(name), "%s", call ? call : wchan ? wchan : "[kernel]");
	return profile__frame(&s->rows, &f);
}

/* The row of wait key wk, whose Lua stack is row lua: made once. */
static long wait_row(struct sampler *s, long lua, const struct nupp_wait_key *wk)
{
	struct wait_row_key rk = { lua, wk->syscall, wk->preempted, wk->wchan };
	__u32 ids[NUPP_MAX_DEPTH + 1];
	const struct profile_row *r;
	long row = keymap__get(&s->wait_rows, &rk, sizeof(rk)), leaf;

	if (row >= 0)
		return row;
	if ((leaf = wait_frame(s, wk)) < 0)
		return -1;
	r = &s->rows.rows[lua];		/* copied: profile__add moves the rows */
	memcpy(ids, r->frames, r->nframes * sizeof(*ids));
	ids[r->nframes] = leaf;
	row = profile__add(&s->rows, r->pid, r->tid, r->g, r->zone, ids, r->nframes + 1);
	if (row < 0)
		return -1;
	s->rows.rows[row].unreadable = s->rows.rows[lua].unreadable;
	s->rows.rows[row].off_cpu = true;
	return keymap__put(&s->wait_rows, &rk, sizeof(rk), row) ? -1 : row;
}

/* Add a wait of ns (n waits) under wk to its row; 0, or -ENOMEM. */
static int add_wait_to_row(struct sampler *s, struct sampler_stats *st, long lua,
			   const struct nupp_wait_key *wk, __u64 ns, __u64 n);

static int add_wait(struct sampler *s, struct sampler_stats *st, const struct nupp_wait_key *wk,
		    __u64 ns, __u64 n)
{
	long lua;

	if (wk->slot >= s->table_len || wk->state >= NUPP_ST_MAX)
		return 0;
	if (!s->slot_row[wk->slot] && see_slot(s, wk->slot, NULL))
		return -ENOMEM;
	if ((lua = s->slot_row[wk->slot] - SLOT_SEEN) < 0)
		return 0;	/* unsymbolized: the stats count it */
	return add_wait_to_row(s, st, lua, wk, ns, n);
}

/* Add a wait of ns (n waits) under wk, whose Lua stack is row lua. */
static int add_wait_to_row(struct sampler *s, struct sampler_stats *st, long lua,
			   const struct nupp_wait_key *wk, __u64 ns, __u64 n)
{
	long row;

	if ((row = wait_row(s, lua, wk)) < 0)
		return -ENOMEM;
	if ((size_t)row >= s->row_ns_cap) {
		size_t cap = 2 * (row + 1);
		__u64 *more = realloc(s->row_ns, cap * NUPP_ST_MAX * sizeof(*more));

		if (!more)
			return -ENOMEM;
		memset(more + s->row_ns_cap * NUPP_ST_MAX, 0,
		       (cap - s->row_ns_cap) * NUPP_ST_MAX * sizeof(*more));
		s->row_ns = more;
		s->row_ns_cap = cap;
	}
	s->row_ns[row * NUPP_ST_MAX + wk->state] += ns;
	st->waits += n;
	if (wk->syscall == NUPP_WAIT_COROUTINE) {
		st->co_waits += n;
		st->co_ns += ns;
	}
	return 0;
}

/* CPU time thread tid has run, ns (the first field of its schedstat: its
 * se.sum_exec_runtime, brought up to date by the read); ran, the entry's,
 * when unreadable. */
static __u64 thread_ran(int pid, int tid, __u64 ran)
{
	unsigned long long ns;
	char path[80];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	if (!(f = fopen(path, "r")))
		return ran;
	if (fscanf(f, "%llu", &ns) != 1 || ns < ran)
		ns = ran;
	fclose(f);
	return ns;
}

/* The waits not charged yet: every thread of a target whose entry notes a
 * wait (the task's storage, which a pidfd of the thread reads:
 * PIDFD_THREAD, Linux 6.9; before, such a wait is not counted). Its wait
 * is charged at its next switch out: until then, it lasted from its start
 * to now less what the thread has run since (nothing, if it is still
 * switched out). Counted up to now: a process stuck in one long wait shows
 * it. */
static int waits_under_way(struct sampler *s, struct sampler_stats *st)
{
	int fd = bpf_map__fd(s->skel->maps.off_since);
	__u64 now = (__u64)(monotonic_s() * 1e9);	/* CLOCK_MONOTONIC, as bpf_ktime_get_ns */
	__u64 min_ns = s->skel->rodata->min_block_ns;

	for (int i = 0; i < s->ntargets; i++) {
		struct target *tg = s->targets[i];
		char path[64];
		struct dirent *d;
		DIR *dir;

		if (tg->gone)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task", tg->pid);
		if (!(dir = opendir(path)))
			continue;
		while ((d = readdir(dir))) {
			int tid = atoi(d->d_name), pfd;
			struct nupp_off_since since;
			__u64 off;

			if (tid <= 0 || (pfd = syscall(SYS_pidfd_open, tid, PIDFD_THREAD)) < 0)
				continue;
			if (bpf_map_lookup_elem(fd, &pfd, &since) || !since.ts || now <= since.ts) {
				close(pfd);
				continue;
			}
			close(pfd);
			off = now - since.ts - (thread_ran(tg->pid, tid, since.ran) - since.ran);
			if ((__s64)off >= (__s64)min_ns &&
			    add_wait(s, st, &since.wait, off * since.weight, since.weight)) {
				closedir(dir);
				return -ENOMEM;
			}
		}
		closedir(dir);
	}
	return 0;
}

/* The row of a wait the sweeps saw whose thread has not come back (yet,
 * or ever: gone while it waited): its Lua stack is read only when it
 * does, so the row is the thread's and the wait's kernel side, under
 * "[still waiting]". */
static int add_unwalked_wait(struct sampler *s, struct sampler_stats *st,
			     const struct nupp_sweep_seen *e)
{
	struct profile_frame f = { .name = "[still waiting]", .file = "[kernel]",
				   .kind = PROFILE_FRAME_KERNEL };
	struct nupp_wait_key wk = e->wait;
	long root = profile__frame(&s->rows, &f), base;
	__u32 ids[1] = { (__u32)root };

	if (root < 0 || (base = profile__add(&s->rows, e->pid, e->tid, 0, "", ids, 1)) < 0)
		return -ENOMEM;
	wk.state = NUPP_ST_C;
	return add_wait_to_row(s, st, base, &wk, e->ns, 1);
}

/* Those, every entry of sweep_seen whose time is not charged yet. */
static int sweeps_under_way(struct sampler *s, struct sampler_stats *st)
{
	int fd = bpf_map__fd(s->skel->maps.sweep_seen);
	struct nupp_sweep_seen e;
	__u32 tid, next;
	bool first = true;

	while (!bpf_map_get_next_key(fd, first ? NULL : &tid, &next)) {
		first = false;
		tid = next;
		if (!bpf_map_lookup_elem(fd, &tid, &e) && e.ns && add_unwalked_wait(s, st, &e))
			return -ENOMEM;
	}
	return 0;
}

/* The waits of threads gone before they came back (prune_sweeps): their
 * time is final, and counted from when it is known. */
static int sweeps_gone(struct sampler *s, struct sampler_stats *st)
{
	for (size_t i = 0; i < s->ngone; i++)
		if (add_unwalked_wait(s, st, &s->gone[i]))
			return -ENOMEM;
	return 0;
}

int waits__rows(struct sampler *s, struct sampler_stats *st)
{
	int fd = bpf_map__fd(s->skel->maps.waits);
	struct nupp_wait_key wk, next;
	struct nupp_wait w;
	bool first = true;

	memset(s->row_ns, 0, s->row_ns_cap * NUPP_ST_MAX * sizeof(*s->row_ns));
	while (!bpf_map_get_next_key(fd, first ? NULL : &wk, &next)) {
		first = false;
		wk = next;
		if (!bpf_map_lookup_elem(fd, &wk, &w) && add_wait(s, st, &wk, w.ns, w.n))
			return -ENOMEM;
	}
	/* A swept wait under way has no stack yet: its time is charged to its
	 * stack when it ends, and only the last read (the session's end)
	 * charges what is left, under "[still waiting]". Each read before
	 * (top's refreshes, --rotate's files) sees counts that only grow. */
	if (s->sweep ? sweeps_gone(s, st) || (s->taking && sweeps_under_way(s, st))
		     : waits_under_way(s, st))
		return -ENOMEM;
	st->switch_every = s->switch_every_max ? s->switch_every_max : 1;
	/* Each row's microseconds, rounded from its nanoseconds' sum. */
	for (size_t r = 0; r < s->rows.nrows && r < s->row_ns_cap; r++)
		for (int i = 0; i < NUPP_ST_MAX; i++)
			s->rows.rows[r].state[i] = (s->row_ns[r * NUPP_ST_MAX + i] + 500) / 1000;
	return 0;
}
