// SPDX-License-Identifier: MIT
/*
 * trace.c - the trace-abort collector: attach, read events, aggregate sites.
 *
 * The probe (bpf/trace.bpf.c) sends the raw abort: TraceError or error
 * object, errinfo, and the location trace_abort() will name, found and
 * captured while the target lives. Everything jit.v would print is derived
 * here the same way jit/v.lua derives it, so that the sites equal what a
 * jit.attach handler in the target would have counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "base/procmem.h"
#include "luajit/symbolize.h"
#include "trace_abi.h"
#include "base/libbpf_setup.h"
#include "base/uprobe.h"
#include "trace.skel.h"
#include "trace_reasons.h"
#include "luajit/code_sites.h"
#include "abort_site.h"
#include "trace.h"
#include "base/util.h"
#include "channel/channel.h"
#include "zones/zones.h"


/* One attached target process. */
struct tr_target {
	const struct lj_target *t;
	struct abort_source src;	/* build, pid, symbolizer, zone table */
	__u32 jit_flags;		/* J->flags, last seen */
	struct uprobe *links[CODE_SITES_MAX_COPIES];	/* one per copy of the site */
	int nlinks;
	bool gone;			/* exited or executed another program */
};

/* One site being counted; the key is severity, reason, location, zone. */
struct tr_site {
	struct trace_site s;
	__u64 hash;
};

struct tracer {
	struct channel channel;		/* first: the session's view of it */
	struct trace_bpf *skel;
	struct bpf_link *exec_link;	/* on_exec */
	struct ring_buffer *rb;
	struct tr_target *tg;
	int ntg;
	bool include_benign;
	bool paused;
	double started;			/* monotonic_s() at the open */
	struct tr_site *sites;
	size_t nsites, capsites;
	unsigned long long total, blacklisted;
};

/* ---- aggregation ----------------------------------------------------------- */

/* The site of an abort of reason r at location in zone, found or added. */
static struct tr_site *site_get(struct tracer *tr, const char *severity, const struct abort_reason *r,
				const char *location, const char *zone)
{
	__u64 h = FNV1A64_INIT;
	const char *key[] = { severity, r->reason, location, zone };

	for (int i = 0; i < 4; i++)	/* each with its NUL: a field separator */
		h = fnv1a64(h, key[i], strlen(key[i]) + 1);
	struct tr_site *s;

	for (size_t i = 0; i < tr->nsites; i++) {
		s = &tr->sites[i];
		if (s->hash == h && !strcmp(s->s.severity, severity) && !strcmp(s->s.reason, r->reason) &&
		    !strcmp(s->s.location, location) && !strcmp(s->s.zone_path, zone))
			return s;
	}
	if (ARRAY_ROOM(tr->sites, tr->nsites, tr->capsites, 32))
		return NULL;
	s = &tr->sites[tr->nsites];
	memset(s, 0, sizeof(*s));
	s->hash = h;
	s->s.severity = severity;
	s->s.reason_class = r->cls;
	if (trace_site__set_strings(&s->s, r->reason, r->id, r->raw, location, zone))
		return NULL;
	tr->nsites++;
	return s;
}

/* The live target of pid: one that is gone may have left its pid to
 * another process. */
static struct tr_target *target_of(struct tracer *tr, pid_t pid)
{
	for (int i = 0; i < tr->ntg; i++)
		if (tr->tg[i].src.pid == pid && !tr->tg[i].gone)
			return &tr->tg[i];
	return NULL;
}

static int handle_event(void *ctx, void *data, size_t size)
{
	struct tracer *tr = ctx;
	const struct nupp_trace_event *e = data;
	static struct abort_reason r;
	static char loc[ABORT_SITE_TEXT_MAX], zone[ABORT_SITE_ZONE_MAX + 1];
	struct tr_target *tg;
	struct tr_site *s;
	const char *severity;
	bool bl;

	if (size < sizeof(*e))
		return 0;
	tg = target_of(tr, (pid_t)e->pid);
	if (!tg || tr->paused)
		return 0;
	tg->jit_flags = e->flags;
	/* Most aborts of a busy JIT are benign and not counted: their texts
	 * are not made (a snprintf each, most of an event's time). */
	bl = abort_site__blacklisted(&tg->src, e);
	severity = trace_site_severity(bl, abort_site__row(&tg->src, e));
	if (!trace_site_counted(severity, tr->include_benign))
		return 0;
	abort_site__reason(&tg->src, e, &r);
	abort_site__location(&tg->src, e, loc, sizeof(loc));
	abort_site__zone_path(&tg->src, e->zone, zone, sizeof(zone));
	s = site_get(tr, severity, &r, loc, zone);
	if (!s)
		return -ENOMEM;
	s->s.count++;
	tr->total++;
	tr->blacklisted += bl;
	return 0;
}

/* ---- the probe site ---------------------------------------------------------- */

/*
 * The probe goes on "if (traceno)" in trace_abort(): the jump on
 * J->cur.traceno, which the kernel emulates rather than single-steps. A
 * compiler may copy that test into the paths that reach it (gcc puts one
 * in the RETRY path), and an abort passes exactly one copy: each gets a
 * probe. The sites come from the build's code (code_sites.h), and each is
 * decoded again from its function's start and must be that jump, or
 * nothing is probed.
 */
int tracer__sites(const struct lj_target *t, __u64 *out, int max, char *err, size_t errsz)
{
	const struct lj_code_sites *cs = &t->sites;
	char why[256] = "";
	int n = 0;

	if (!cs->abort_site) {
		snprintf(err, errsz, "%s: no trace-abort site: %s", t->shown,
			 cs->abort_why[0] ? cs->abort_why : "not found in its code");
		return 0;
	}
	for (int i = -1; i < cs->abort_nmore && n < max; i++) {
		__u64 at = i < 0 ? cs->abort_site : cs->abort_more[i];

		if (code_sites__verify(t->path, at, CODE_SITE_TRACENO_JCC, &t->layout, why, sizeof(why))) {
			snprintf(err, errsz, "%s: the trace-abort site 0x%llx is not the expected jump "
				 "(%s); not probing it", t->shown, (unsigned long long)at, why);
			return 0;
		}
		out[n++] = at;
	}
	return n;
}

/* ---- open / poll / report / close ------------------------------------------- */

/* OpenResty's trace_abort() named the location through lj_debug_frame()
 * from 2019-02-21 (864c72e3) until it merged upstream's frame search again
 * on 2023-10-06 (82bff39f); upstream always searched down to the first Lua
 * frame. Bookworm's luajit2 (2023-01-19) is of the first kind. */
static bool debug_frame_locations(const struct lj_target *t)
{
	const struct lj_build *b = lj_target__build(t);
	__u64 when;

	if (!b->tree || strcmp(b->tree, "luajit2"))
		return false;
	if (t->build)
		return true;
	when = t->rev ? t->rev->time : t->derived.version.rolling;
	return when >= 1550807621ULL && when < 1696555301ULL;
}

/* The zone state's current path, as the probe reads it (0: none). */
static __u64 zone_current(__u64 zone_state_addr)
{
	return zone_state_addr ? zone_state_addr + 4 : 0;	/* .current */
}

static void detach(struct tr_target *tg)
{
	for (int i = 0; i < tg->nlinks; i++)
		uprobe__detach(tg->links[i]);
	tg->nlinks = 0;
}

/* Where the probe reads its blocks of jit_State, lua_State and GCproto in
 * p's layout (struct nupp_trace_proc); -1 with why in err when a block
 * would be longer than the probe reads. */
static int fit_blocks(struct nupp_trace_proc *p, pid_t pid, char *err, size_t errsz)
{
	const struct lj_layout *lj = &p->lj;
	const __u32 jlo[] = { lj->J_cur_startpt, lj->J_cur_startpc, lj->J_cur_traceno,
			      lj->J_cur_startins, lj->J_L, lj->J_pc, lj->J_pt, lj->J_flags };
	const __u32 jhi[] = { lj->J_parent, lj->J_exitno, lj->J_errinfo };
	const __u32 L[] = { lj->L_base, lj->L_top, lj->L_stack };
	const __u32 pt[] = { lj->pt_sizebc, lj->pt_chunkname, lj->pt_firstline, lj->pt_numline,
			     lj->pt_lineinfo };
	const __u32 fn[] = { lj->fn_ffid, lj->fn_pc, lj->fn_f };
	__u32 pt_lo, fn_lo;

	/* The GCproto's and GCfunc's blocks are read from their start: their
	 * headers are small. */
	if (lj_block_of(jlo, sizeof(jlo) / sizeof(jlo[0]), NUPP_TJ_BLK, &p->j_lo, &p->j_lo_len) ||
	    lj_block_of(jhi, sizeof(jhi) / sizeof(jhi[0]), NUPP_TJ_BLK, &p->j_hi, &p->j_hi_len) ||
	    lj_block_of(L, sizeof(L) / sizeof(L[0]), NUPP_TL_BLK, &p->L_blk, &p->L_len) ||
	    lj_block_of(pt, sizeof(pt) / sizeof(pt[0]), NUPP_TPT_BLK, &pt_lo, &p->pt_len) ||
	    (p->pt_len += pt_lo) > NUPP_TPT_BLK ||
	    lj_block_of(fn, sizeof(fn) / sizeof(fn[0]), NUPP_TFN_BLK, &fn_lo, &p->fn_len) ||
	    (p->fn_len += fn_lo) > NUPP_TFN_BLK || lj->str_size > 63) {
		snprintf(err, errsz, "the LuaJIT layout of PID %d spreads the recorder's fields "
			 "wider than the trace probe reads at once", pid);
		return -1;
	}
	return 0;
}

static int target_attach(struct tracer *tr, struct tr_target *tg, char *err, size_t errsz)
{
	const struct lj_target *t = tg->t;
	struct nupp_trace_proc proc = { .lj = t->layout, .zone_cur = zone_current(tg->src.zone_state) };
	__u32 key = tg->src.pid;
	__u64 sites[CODE_SITES_MAX_COPIES], offs[CODE_SITES_MAX_COPIES], J;
	int nsites;

	tg->src.b = lj_target__build(t);
	proc.debug_frame = debug_frame_locations(t);
	/* Until the registry fills them: their places in jit_State / GCtrace. */
	if (!proc.lj.J_cur_startins)
		proc.lj.J_cur_startins = proc.lj.J_cur_startpc + 8;
	if (!proc.lj.J_flags)
		proc.lj.J_flags = proc.lj.J_pt + 16;
	if (fit_blocks(&proc, tg->src.pid, err, errsz))
		return -1;
	nsites = tracer__sites(t, sites, CODE_SITES_MAX_COPIES, err, errsz);
	if (!nsites)
		return -1;
	for (int i = 0; i < nsites; i++) {
		offs[i] = lj_target__file_offset(t, sites[i]);
		if (!offs[i]) {
			snprintf(err, errsz, "%s: the trace-abort site is not in a loaded segment", t->shown);
			return -1;
		}
	}
	if (t->ngs > 0) {
		J = t->gs[0] - t->layout.gg_g + t->layout.gg_j;
		procmem__read(tg->src.pid, &tg->jit_flags, 4, J + proc.lj.J_flags);
	}
	if (bpf_map__update_elem(tr->skel->maps.procs, &key, sizeof(key), &proc, sizeof(proc), BPF_ANY)) {
		snprintf(err, errsz, "failed to configure the probe for PID %d: %s", tg->src.pid, strerror(errno));
		return -1;
	}
	for (tg->nlinks = 0; tg->nlinks < nsites; tg->nlinks++) {
		struct uprobe *l = uprobe__attach(tr->skel->progs.trace_abort_site, tg->src.pid,
						  t->path, offs[tg->nlinks], 0);

		if (getenv("NUPP_VERBOSE"))
			fprintf(stderr, "trace: pid %d: %s site vaddr 0x%llx file offset 0x%llx\n",
				tg->src.pid, t->path, (unsigned long long)sites[tg->nlinks],
				(unsigned long long)offs[tg->nlinks]);
		if (!l) {
			snprintf(err, errsz, "failed to attach uprobe to %s: %s", t->shown, strerror(errno));
			return -1;
		}
		tg->links[tg->nlinks] = l;
	}
	return 0;
}

int tracer__add_target(struct tracer *tr, const struct lj_target *t, struct zones *z,
			char *err, size_t errsz)
{
	struct tr_target *tg = realloc(tr->tg, (tr->ntg + 1) * sizeof(*tg));

	if (!tg) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	tr->tg = tg;
	tg = &tr->tg[tr->ntg];
	/* The reader reads t's pid, which stays where it is (tg moves). */
	*tg = (struct tr_target){ .t = t, .src = { .pid = t->pid, .zone_state = z ? zones__state_addr(z) : 0,
		.sym = symbolizer__new(lj_target__build(t), procmem__reader(&t->pid)) } };
	if (!tg->src.sym) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	if (target_attach(tr, tg, err, errsz)) {
		__u32 key = t->pid;

		detach(tg);	/* the copies of the site attached before one failed */
		bpf_map__delete_elem(tr->skel->maps.procs, &key, sizeof(key), 0);
		symbolizer__free(tg->src.sym);
		return -1;
	}
	tr->ntg++;
	return 0;
}

/* A wake by aborts (their probe wakes the ring when it had been read
 * empty) mutes them for this long: a burst of aborts costs 100 wakes a
 * second, and they are taken in within ~10 ms, as their zone paths are
 * read from the process. */
#define ABORT_WAKE_GAP_MS	10

/* The collector as a channel of a session (channel.h). */
static int ch_add_target(struct channel *c, const struct lj_target *t, struct zones *z,
			 char *err, size_t errsz)
{
	return tracer__add_target((struct tracer *)c, t, z, err, errsz);
}

static void ch_remove_target(struct channel *c, const struct lj_target *t)
{
	tracer__remove_target((struct tracer *)c, t);
}

static bool ch_target_execed(struct channel *c, pid_t pid)
{
	return tracer__target_execed((struct tracer *)c, pid);
}

static int ch_set_zones(struct channel *c, const struct lj_target *t, struct zones *z)
{
	return tracer__set_zones((struct tracer *)c, t, z);
}

static int ch_fd(const struct channel *c)
{
	return tracer__fd((const struct tracer *)c);
}

static int ch_drain(struct channel *c)
{
	return tracer__poll((struct tracer *)c, 0);
}

static void ch_pause(struct channel *c, bool paused)
{
	tracer__pause((struct tracer *)c, paused);
}

static void ch_close(struct channel *c)
{
	tracer__close((struct tracer *)c);
}

static const struct channel_ops tracer_channel = {
	.name = "trace",
	.add_target = ch_add_target,
	.remove_target = ch_remove_target,
	.target_execed = ch_target_execed,
	.set_zones = ch_set_zones,
	.fd = ch_fd,
	.drain = ch_drain,
	.pause = ch_pause,
	.close = ch_close,
};

struct channel *tracer__channel(struct tracer *tr)
{
	return tr ? &tr->channel : NULL;
}

struct tracer *tracer__open(const struct tracer_opts *o, char *err, size_t errsz)
{
	struct tracer *tr = calloc(1, sizeof(*tr));

	if (tr)
		tr->channel = (struct channel){ &tracer_channel, { .mute_ms = ABORT_WAKE_GAP_MS } };
	if (!tr) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	tr->include_benign = o->include_benign;
	tr->skel = trace_bpf__open_opts(libbpf_setup__open_opts());
	if (tr->skel)
		uprobe__prepare(tr->skel->progs.trace_abort_site);
	if (!tr->skel || trace_bpf__load(tr->skel)) {
		snprintf(err, errsz, "failed to load the trace BPF program: %s", strerror(errno));
		goto fail;
	}
	if (libbpf_setup__learn_pid_view(tr->skel->progs.learn_pid_view, &tr->skel->bss->view_learned,
					 err, errsz))
		goto fail;
	tr->exec_link = bpf_program__attach(tr->skel->progs.on_exec);
	if (!tr->exec_link) {
		snprintf(err, errsz, "failed to attach to sched_process_exec: %s", strerror(errno));
		goto fail;
	}
	tr->rb = ring_buffer__new(bpf_map__fd(tr->skel->maps.events), handle_event, tr, NULL);
	if (!tr->rb) {
		snprintf(err, errsz, "failed to create the ring buffer reader: %s", strerror(errno));
		goto fail;
	}
	tr->started = monotonic_s();
	return tr;
fail:
	tracer__close(tr);
	return NULL;
}

int tracer__set_zones(struct tracer *tr, const struct lj_target *t, struct zones *z)
{
	struct tr_target *tg = target_of(tr, t->pid);
	__u64 zone_state_addr = z ? zones__state_addr(z) : 0;
	struct nupp_trace_proc proc;
	__u32 key = t->pid;

	if (!tg)
		return -ESRCH;
	if (bpf_map__lookup_elem(tr->skel->maps.procs, &key, sizeof(key), &proc, sizeof(proc), 0))
		return -errno;
	proc.zone_cur = zone_current(zone_state_addr);
	/* BPF_EXIST: an exec since the lookup deleted the entry, and must
	 * find it deleted (tracer__target_execed). */
	if (bpf_map__update_elem(tr->skel->maps.procs, &key, sizeof(key), &proc, sizeof(proc), BPF_EXIST))
		return -errno;
	tg->src.zone_state = zone_state_addr;
	return 0;
}

/* Take in tg's events so far, then forget it. Its probe fires no more for a
 * process that exited, and stays attached until tracer__close (destroying a
 * uprobe link waits for an RCU grace period, ~0.15 s). */
static void retire(struct tracer *tr, struct tr_target *tg)
{
	__u32 key = tg->src.pid;

	ring_buffer__consume(tr->rb);
	bpf_map__delete_elem(tr->skel->maps.procs, &key, sizeof(key), 0);
	tg->gone = true;
}

void tracer__remove_target(struct tracer *tr, const struct lj_target *t)
{
	struct tr_target *tg = target_of(tr, t->pid);

	if (!tg)
		return;
	retire(tr, tg);
	/* The process is gone: its probes serve no one (and hold a file and a
	 * uprobe's registration each to the session's end). */
	for (int i = 0; i < tg->nlinks; i++)
		uprobe__detach_aside(tg->links[i]);
	tg->nlinks = 0;
}

bool tracer__target_execed(struct tracer *tr, pid_t pid)
{
	struct tr_target *tg = target_of(tr, pid);
	struct nupp_trace_proc proc;
	__u32 key = pid;

	if (!tg || !bpf_map__lookup_elem(tr->skel->maps.procs, &key, sizeof(key), &proc,
					 sizeof(proc), 0))
		return false;
	retire(tr, tg);
	/* A new image that maps the same file would hit these probes too, next
	 * to the ones its own target attaches. */
	detach(tg);
	return true;
}

int tracer__poll(struct tracer *tr, int timeout_ms)
{
	/* Wait out the timeout or a wakeup, then consume whatever is there.
	 * Without a wait, only the latter: the ring's positions are in
	 * memory shared with the kernel, and a session's every wake takes
	 * its aborts in (a system call each, in a young process's 1-ms
	 * wakes). */
	int n = timeout_ms ? ring_buffer__poll(tr->rb, timeout_ms) : 0;

	if (n < 0 && n != -EINTR)
		return n;
	return ring_buffer__consume(tr->rb);
}

int tracer__fd(const struct tracer *tr)
{
	return ring_buffer__epoll_fd(tr->rb);
}

void tracer__pause(struct tracer *tr, bool paused)
{
	tr->paused = paused;		/* events queued before are dropped too */
	tr->skel->bss->paused = paused;
}

int tracer__counters(struct tracer *tr, __u64 *out)
{
	int ncpu = libbpf_num_possible_cpus();

	memset(out, 0, NUPP_TRC_MAX * sizeof(out[0]));
	if (ncpu <= 0)
		return ncpu;
	__u64 vals[ncpu];
	for (__u32 k = 0; k < NUPP_TRC_MAX; k++) {
		if (bpf_map__lookup_elem(tr->skel->maps.counters, &k, sizeof(k), vals, sizeof(vals), 0))
			return -errno;
		for (int c = 0; c < ncpu; c++)
			out[k] += vals[c];
	}
	return 0;
}

static __u64 lost_events(struct tracer *tr)
{
	__u64 c[NUPP_TRC_MAX];

	if (tracer__counters(tr, c))
		return 0;
	return c[NUPP_TRC_RB_FULL] + c[NUPP_TRC_READ] + c[NUPP_TRC_NO_J];
}

int tracer__report(struct tracer *tr, struct trace_report *out)
{
	memset(out, 0, sizeof(*out));
	tracer__poll(tr, 0);
	out->duration_sec = monotonic_s() - tr->started;
	out->total_aborts = tr->total;
	out->blacklisted = tr->blacklisted;
	out->catalog_id = TRACE_REASONS_CATALOG_ID;
	out->catalog_version = TRACE_REASONS_CATALOG_VERSION;
	out->lost = lost_events(tr);
	if (tr->ntg)
		trace_profile__fill(tr->tg[0].t, tr->tg[0].jit_flags, &out->profile);
	out->sites = calloc(tr->nsites ? tr->nsites : 1, sizeof(*out->sites));
	if (!out->sites)
		return -ENOMEM;
	for (size_t i = 0; i < tr->nsites; i++) {
		const struct trace_site *s = &tr->sites[i].s;
		struct trace_site *d = &out->sites[out->nsites++];

		*d = *s;
		if (trace_site__set_strings(d, s->reason, s->reason_id, s->raw_reason, s->location, s->zone_path)) {
			trace_report__free(out);
			return -ENOMEM;
		}
	}
	qsort(out->sites, out->nsites, sizeof(*out->sites), trace_site__cmp);
	return 0;
}

void tracer__close(struct tracer *tr)
{
	if (!tr)
		return;
	ring_buffer__free(tr->rb);
	for (int i = 0; i < tr->ntg; i++) {
		detach(&tr->tg[i]);
		symbolizer__free(tr->tg[i].src.sym);
	}
	bpf_link__destroy(tr->exec_link);
	trace_bpf__destroy(tr->skel);
	for (size_t i = 0; i < tr->nsites; i++)
		trace_site__free(&tr->sites[i].s);
	free(tr->sites);
	free(tr->tg);
	free(tr);
}
