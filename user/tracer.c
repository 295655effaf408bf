// SPDX-License-Identifier: MIT
/*
 * tracer.c - the trace-abort collector: attach, read events, aggregate sites.
 *
 * The probe (bpf/trace.bpf.c) sends the raw abort: TraceError or error
 * object, errinfo, J->pc and the frames below J->L->base. Everything jit.v
 * would print is derived here, right after the event, the same way the
 * target's trace_abort() and jit/v.lua derive it, so that the sites equal
 * what a jit.attach handler in the target would have counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "procmem.h"
#include "symbolize.h"
#include "trace.h"
#include "trace.skel.h"
#include "trace_reasons.h"
#include "code_sites.h"
#include "tracer.h"

#define NO_BCPOS	0xffffffffU	/* lj_def.h */
#define STR_MAX		4096		/* longest chunk name or message read */
#define LOC_MAX		(STR_MAX + 64)	/* a location or reason built from one */
#define ZONE_PATH_MAX	1024		/* zone_state.h NUPP_ZONE_PATH_MAX */

/* One attached target process. */
struct tr_target {
	const struct lj_target *t;
	const struct lj_build *b;
	pid_t pid;
	bool b_tree;			/* lj_debug_frame() locations (debug_frame_locations) */
	__u64 zone_state;		/* &nupp_zone_state in the target, 0 none */
	__u32 jit_flags;		/* J->flags, last seen */
	struct bpf_link *links[CODE_SITES_MAX_COPIES];	/* one per copy of the site */
	int nlinks;
	struct symbolizer *sym;		/* for lines, as the sampler finds them */
	bool gone;			/* exited or executed another program */
};

/* One site being counted; the key is severity, reason, location, zone. */
struct tr_site {
	struct trace_site s;
	__u64 hash;
};

struct tracer {
	struct trace_bpf *skel;
	struct bpf_link *exec_link;	/* on_exec */
	struct ring_buffer *rb;
	struct tr_target *tg;
	int ntg;
	bool include_benign;
	bool paused;
	struct timespec started;
	struct tr_site *sites;
	size_t nsites, capsites;
	unsigned long long total, blacklisted;
};

/* ---- small helpers ------------------------------------------------------- */

static char *xstrdup(const char *s)
{
	return strdup(s ? s : "");
}

static int appendf(char *buf, size_t sz, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int appendf(char *buf, size_t sz, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len >= sz)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, sz - *len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	*len = *len + n < sz ? *len + n : sz - 1;
	return 0;
}

static __u64 fnv1a64(const char *s, __u64 h)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return (h ^ 0xff) * 0x100000001b3ULL;	/* field separator */
}

/* A GCstr's characters (up to STR_MAX) into out; length or -1. */
static int read_gcstr(pid_t pid, const struct lj_layout *lj, __u64 s, char *out, size_t outsz)
{
	__u32 len;

	if (!s || procmem__read(pid, &len, 4, s + lj->str_len))
		return -1;
	if (len >= outsz)
		len = outsz - 1;
	if (len && procmem__read(pid, out, len, s + lj->str_size))
		return -1;
	out[len] = 0;
	return len;
}


/* A number TValue as an int: a double, or (LJ_DUALNUM builds, e.g.
 * LUAJIT_NUMMODE=2) an integer tagged LJ_TISNUM in its low 32 bits. */
static bool tv_int(__u64 v, int *out)
{
	__u32 itype = (__u32)((__s64)v >> 47);
	double d;

	if (itype == LJ_TISNUM) {
		*out = (int)(__u32)v;
		return true;
	}
	if (itype > LJ_TISNUM)
		return false;
	memcpy(&d, &v, sizeof(d));
	*out = (int)d;
	return true;
}

static const char *table_name(const char *const *tab, int n, int i)
{
	return tab && i >= 0 && i < n ? tab[i] : NULL;
}

/* ---- locations (lj_debug.c, lib_jit.c, jit/v.lua) ------------------------ */

/* lj_debug_pushloc(): what jit.util.funcinfo(fn, pos).loc holds. */
static int proto_loc(const struct tr_target *tg, __u64 pt, __u32 pos, char *out, size_t outsz)
{
	const struct lj_layout *lj = &tg->b->layout;
	pid_t pid = tg->pid;
	static char name[STR_MAX];
	__u64 cn;
	__s32 first;
	int len, line, i;
	const char *s = name;

	if (procmem__read(pid, &cn, 8, pt + lj->pt_chunkname) ||
	    procmem__read(pid, &first, 4, pt + lj->pt_firstline))
		return -1;
	len = read_gcstr(pid, lj, cn & LJ_GCVMASK, name, sizeof(name));
	line = symbolizer__line(tg->sym, pt, pos);	/* lj_debug_line() */
	if (len < 0 || line < 0)
		return -1;
	if (first == -1) {
		snprintf(out, outsz, "builtin:%s", s);
	} else if (*s == '@') {
		s++, len--;
		for (i = len; i > 0; i--)
			if (s[i] == '/' || s[i] == '\\') {
				s += i + 1;
				break;
			}
		snprintf(out, outsz, "%s:%d", s, line);
	} else if (len > 40) {
		char p[24];

		symbolize__fmt_ptr(p, pt);
		snprintf(out, outsz, "%s:%d", p, line);
	} else if (*s == '=') {
		snprintf(out, outsz, "%s:%d", s + 1, line);
	} else {
		snprintf(out, outsz, "\"%s\":%d", s, line);
	}
	return 0;
}

/* jit/v.lua fmtfunc(func, pc): a Lua function's loc, a builtin's name or
 * "C:addr". pos is the int the vmevent carried. */
static void fmtfunc(const struct tr_target *tg, __u64 fn, __s32 pos, char *out, size_t outsz)
{
	const struct lj_layout *lj = &tg->b->layout;
	__u8 ffid;
	__u64 v;

	if (procmem__read(tg->pid, &ffid, 1, fn + lj->fn_ffid))
		goto unknown;
	if (ffid == 0) {
		if (procmem__read(tg->pid, &v, 8, fn + lj->fn_pc) ||
		    proto_loc(tg, v - lj->pt_size, (__u32)pos, out, outsz))
			goto unknown;
		return;
	}
	if (ffid > 1) {
		const char *name = table_name(tg->b->ffnames, tg->b->nffnames, ffid);

		if (name) {
			snprintf(out, outsz, "%s", name);
			return;
		}
	}
	if (procmem__read(tg->pid, &v, 8, fn + lj->fn_f))
		goto unknown;
	snprintf(out, outsz, "C:%llx", (unsigned long long)v);
	return;
unknown:
	snprintf(out, outsz, "(?)");
}

/* proto_bcpos(funcproto(fn), pc) as the int setintV() stores. */
static __s32 fn_bcpos(const struct tr_target *tg, __u64 fn, __u64 pc)
{
	const struct lj_layout *lj = &tg->b->layout;
	__u64 bc;

	if (procmem__read(tg->pid, &bc, 8, fn + lj->fn_pc))
		return -1;
	return (__s32)(__u32)((__s64)(pc - bc) / 4);
}

/* The "abort" vmevent's func and pos, LuaJIT's way (lj_trace.c trace_abort):
 * walk down from J->L->base-1 to the first Lua function; pc moves to each
 * non-Lua frame's return pc - 1. */
static int abort_func_lj(const struct nupp_trace_event *e, __u64 *fn, __u64 *pc)
{
	*pc = e->pc;
	for (int i = 0; i < e->nframes; i++) {
		const struct nupp_trace_frame *fr = &e->frames[i];

		if (fr->ffid == 0 && fr->func != e->L) {
			*fn = fr->func;
			return 0;
		}
		*pc = ((fr->link & LJ_FRAME_TYPEP) == LJ_FRAME_CONT ? fr->contpc : fr->link) - 4;
	}
	return -1;
}

/* The same, luajit2's way: lj_debug_frame(L, 0) and lj_debug_framepc(). */
static int abort_func_lj2(const struct tr_target *tg, const struct nupp_trace_event *e,
			  __u64 *fn, __s32 *pos)
{
	const struct nupp_trace_frame *fr = NULL;
	__u64 ins;
	__u8 ffid;

	for (int i = 0; i < e->nframes; i++)
		if (e->frames[i].func != e->L) {
			fr = &e->frames[i];
			break;
		}
	if (!fr)
		return -1;
	*fn = fr->func;
	ffid = fr->ffid;
	if (ffid != 0) {
		*pos = (__s32)NO_BCPOS;
	} else if (fr->slot == e->base - 8) {
		*pos = fn_bcpos(tg, fr->func, e->pc);
	} else {
		/* debug_framepc() with nextframe == frame: only after a dummy frame. */
		if ((fr->link & LJ_FRAME_TYPE) == LJ_FRAME_LUA)
			ins = fr->link;
		else if ((fr->link & LJ_FRAME_TYPEP) == LJ_FRAME_CONT)
			ins = fr->contpc;
		else
			ins = 0;
		*pos = ins ? fn_bcpos(tg, fr->func, ins) - 1 : (__s32)NO_BCPOS;
	}
	return 0;
}

static void abort_location(const struct tr_target *tg, const struct nupp_trace_event *e,
			   char *out, size_t outsz)
{
	__u64 fn, pc;
	__s32 pos;

	if (tg->b_tree) {
		if (abort_func_lj2(tg, e, &fn, &pos))
			goto unknown;
	} else {
		if (abort_func_lj(e, &fn, &pc))
			goto unknown;
		pos = fn_bcpos(tg, fn, pc);
	}
	fmtfunc(tg, fn, pos, out, outsz);
	return;
unknown:
	snprintf(out, outsz, "(?)");
}

/* ---- reasons ------------------------------------------------------------- */

struct tr_reason {
	char raw[LOC_MAX];		/* jit.v's text */
	char reason[2 * LOC_MAX];		/* with opcode / IR names */
	char id[256];
	const char *cls;
	const char *severity;
	int err;			/* TraceError, -1 for an error object */
};

/* Format a traceerr template with errinfo, as string.format(fmt, info). */
static void fmt_template(const char *tmpl, const char *arg, char *out, size_t outsz)
{
	const char *p = strchr(tmpl, '%');

	if (!p || (p[1] != 'd' && p[1] != 's')) {
		snprintf(out, outsz, "%s", tmpl);
		return;
	}
	snprintf(out, outsz, "%.*s%s%s", (int)(p - tmpl), tmpl, arg, p + 2);
}

static void event_reason(const struct tr_target *tg, const struct nupp_trace_event *e,
			 struct tr_reason *r)
{
	const struct lj_build *b = tg->b;
	const struct trace_reason *row;
	const char *tmpl, *detail = NULL;
	char arg[LOC_MAX] = "";

	if (!tv_int(e->errobj, &r->err))
		r->err = -1;
	if (r->err < 0) {
		/* A Lua error object: jit.v prints it as it is. */
		if ((__u32)((__s64)e->errobj >> 47) == LJ_TSTR) {
			size_t n = e->msglen < NUPP_TRACE_MSG ? e->msglen : NUPP_TRACE_MSG;

			if (e->msglen > NUPP_TRACE_MSG &&
			    read_gcstr(tg->pid, &b->layout, e->errobj & LJ_GCVMASK, r->raw, sizeof(r->raw)) >= 0)
				n = strlen(r->raw);
			else
				memcpy(r->raw, e->msg, n), r->raw[n] = 0;
		} else {
			snprintf(r->raw, sizeof(r->raw), "(error object)");
		}
		/* reason is the traceerr text (RECERR); the message is rawReason. */
		tmpl = table_name(b->traceerr, b->ntraceerr, 0);
		snprintf(r->reason, sizeof(r->reason), "%s", tmpl ? tmpl : r->raw);
	} else {
		tmpl = table_name(b->traceerr, b->ntraceerr, r->err);
		/* Since 2023 LuaJIT writes "NYI: bytecode %s" (jit.v fills in the
		 * name); the catalog and the raw text keep the number's form. */
		if (tmpl && !strcmp(tmpl, "NYI: bytecode %s"))
			tmpl = "NYI: bytecode %d";
		if (!tmpl) {
			snprintf(r->raw, sizeof(r->raw), "trace error %d", r->err);
			snprintf(r->reason, sizeof(r->reason), "%s", r->raw);
		} else {
			int n = 0;

			tv_int(e->errinfo, &n);

			if ((__u32)((__s64)e->errinfo >> 47) == LJ_TFUNC)
				fmtfunc(tg, e->errinfo & LJ_GCVMASK, 0, arg, sizeof(arg));
			else
				snprintf(arg, sizeof(arg), "%d", n);
			fmt_template(tmpl, arg, r->raw, sizeof(r->raw));
			if (strstr(tmpl, "bytecode %d"))
				detail = table_name(b->bcnames, b->nbcnames, n);
			else if (strstr(tmpl, "IR instruction %d"))
				detail = table_name(b->irnames, b->nirnames, n);
			else if (strstr(tmpl, "%s"))
				detail = arg;
			if (detail && detail != arg)
				fmt_template(tmpl, detail, r->reason, sizeof(r->reason));
			else
				snprintf(r->reason, sizeof(r->reason), "%s", r->raw);
		}
	}
	row = tmpl ? trace_reason__by_text(tmpl) : NULL;
	if (row) {
		snprintf(r->id, sizeof(r->id), "%s%s%s", row->id, detail ? "." : "", detail ? detail : "");
		r->cls = row->cls;
		r->severity = row->severity;
	} else {
		snprintf(r->id, sizeof(r->id), "trace.unknown");
		r->cls = "risk";
		r->severity = "warn";
	}
}

/* Did this abort blacklist its start bytecode? blacklist_pc() has run by the
 * probe point: the start instruction changed from OP to IOP (FORL -> IFORL,
 * ITERL -> IITERL, LOOP -> ILOOP, FUNCF -> IFUNCF, FUNCV -> IFUNCV) or from
 * ITERN to ITERC. Only root traces (parent 0, exitno 0) are penalized. */
static bool event_blacklisted(const struct tr_target *tg, const struct nupp_trace_event *e)
{
	const struct lj_build *b = tg->b;
	const char *was = table_name(b->bcnames, b->nbcnames, e->startins & 0xff);
	const char *now = table_name(b->bcnames, b->nbcnames, e->startins_now & 0xff);

	if (e->parent || e->exitno || !e->startpc || !was || !now ||
	    (e->startins & 0xff) == (e->startins_now & 0xff))
		return false;
	if (!strcmp(was, "ITERN"))
		return !strcmp(now, "ITERC");
	return now[0] == 'I' && !strcmp(now + 1, was);
}

/* ---- zones ----------------------------------------------------------------- */

static void zone_path(const struct tr_target *tg, __u32 id, char *out, size_t outsz)
{
	__u32 npaths;
	__u64 paths, p;

	out[0] = 0;
	if (!id || !tg->zone_state ||
	    procmem__read(tg->pid, &npaths, 4, tg->zone_state + 16) || id > npaths ||
	    procmem__read(tg->pid, &paths, 8, tg->zone_state + 24) ||
	    procmem__read(tg->pid, &p, 8, paths + 8ULL * id))
		return;
	/* Read byte-wise bounded chunks: the string may end near a page end. */
	for (size_t n = 0; n + 1 < outsz && n < ZONE_PATH_MAX; n++) {
		if (procmem__read(tg->pid, out + n, 1, p + n) || !out[n]) {
			out[n] = 0;
			return;
		}
		out[n + 1] = 0;
	}
}

/* ---- aggregation ----------------------------------------------------------- */

static struct tr_site *site_get(struct tracer *tr, const char *severity, const char *reason,
				const char *location, const char *zone)
{
	__u64 h = fnv1a64(zone, fnv1a64(location, fnv1a64(reason, fnv1a64(severity, 0xcbf29ce484222325ULL))));
	struct tr_site *s;

	for (size_t i = 0; i < tr->nsites; i++) {
		s = &tr->sites[i];
		if (s->hash == h && !strcmp(s->s.severity, severity) && !strcmp(s->s.reason, reason) &&
		    !strcmp(s->s.location, location) && !strcmp(s->s.zone_path, zone))
			return s;
	}
	if (tr->nsites == tr->capsites) {
		size_t cap = tr->capsites ? 2 * tr->capsites : 32;
		struct tr_site *n = realloc(tr->sites, cap * sizeof(*n));

		if (!n)
			return NULL;
		tr->sites = n;
		tr->capsites = cap;
	}
	s = &tr->sites[tr->nsites];
	memset(s, 0, sizeof(*s));
	s->hash = h;
	s->s.severity = severity;
	s->s.reason = xstrdup(reason);
	s->s.location = xstrdup(location);
	s->s.zone_path = xstrdup(zone);
	if (!s->s.reason || !s->s.location || !s->s.zone_path) {
		free(s->s.reason), free(s->s.location), free(s->s.zone_path);
		return NULL;
	}
	tr->nsites++;
	return s;
}

/* The live target of pid: one that is gone may have left its pid to
 * another process. */
static struct tr_target *target_of(struct tracer *tr, pid_t pid)
{
	for (int i = 0; i < tr->ntg; i++)
		if (tr->tg[i].pid == pid && !tr->tg[i].gone)
			return &tr->tg[i];
	return NULL;
}

static int handle_event(void *ctx, void *data, size_t size)
{
	struct tracer *tr = ctx;
	const struct nupp_trace_event *e = data;
	static struct tr_reason r;
	static char loc[LOC_MAX], zone[ZONE_PATH_MAX + 1];
	struct tr_target *tg;
	struct tr_site *s;
	bool bl;

	if (size < sizeof(*e))
		return 0;
	tg = target_of(tr, (pid_t)e->pid);
	if (!tg || tr->paused)
		return 0;
	tg->jit_flags = e->flags;
	event_reason(tg, e, &r);
	bl = event_blacklisted(tg, e);
	if (!bl && !tr->include_benign && !strcmp(r.cls, "stop"))
		return 0;
	abort_location(tg, e, loc, sizeof(loc));
	zone_path(tg, e->zone, zone, sizeof(zone));
	s = site_get(tr, bl ? "blacklist" : r.severity, r.reason, loc, zone);
	if (!s)
		return -ENOMEM;
	if (!s->s.count) {
		s->s.reason_id = xstrdup(r.id);
		s->s.reason_class = r.cls;
		s->s.raw_reason = xstrdup(r.raw);
		if (!s->s.reason_id || !s->s.raw_reason)
			return -ENOMEM;
	}
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

/* ---- profile --------------------------------------------------------------- */

/* jit.status() names by J->flags bit (lj_jit.h JIT_F_CPUSTRING / OPTSTRING of
 * the x86 target; luajit2 adds "fma" to the optimizations). */
static const struct { __u32 bit; const char *name; bool b_only; } jit_flag_names[] = {
	{ 0x00000010, "SSE3", false }, { 0x00000020, "SSE4.1", false }, { 0x00000040, "BMI2", false },
	{ 0x00010000, "fold", false }, { 0x00020000, "cse", false }, { 0x00040000, "dce", false },
	{ 0x00080000, "fwd", false }, { 0x00100000, "dse", false }, { 0x00200000, "narrow", false },
	{ 0x00400000, "loop", false }, { 0x00800000, "abc", false }, { 0x01000000, "sink", false },
	{ 0x02000000, "fuse", false }, { 0x04000000, "fma", true },
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first run of 8 digits in the package version (git20220320, 2.1-20230119). */
static long long package_date(const char *pkg)
{
	for (const char *p = pkg; p && *p; p++) {
		int n = 0;

		while (p[n] >= '0' && p[n] <= '9')
			n++;
		if (n == 8)
			return strtoll(p, NULL, 10);
		if (n)
			p += n - 1;
	}
	return 0;
}

void tracer__profile(const struct lj_target *t, __u32 jit_flags, struct trace_profile *out)
{
	const struct lj_build *b = lj_target__build(t);
	bool b_tree = b->tree && !strcmp(b->tree, "luajit2");
	__u32 h = 2166136261U;
	size_t len = 0;

	memset(out, 0, sizeof(*out));
	out->supported = t->build != NULL || t->rev != NULL;
	if (t->build)
		snprintf(out->luajit_revision, sizeof(out->luajit_revision), "%s", b->package);
	else if (t->rev)	/* the revision the table matched */
		snprintf(out->luajit_revision, sizeof(out->luajit_revision), "%s %.100s", t->rev->fork,
			 t->rev->commit ? t->rev->commit : t->rev->source);
	else
		snprintf(out->luajit_revision, sizeof(out->luajit_revision), "external:%.100s", t->shown);
	out->luajit_version = t->build ? package_date(b->package) : (long long)t->derived.version.rolling;
	snprintf(out->architecture, sizeof(out->architecture), "x64");
	snprintf(out->operating_system, sizeof(out->operating_system), "Linux");
	for (size_t i = 0; i < sizeof(jit_flag_names) / sizeof(jit_flag_names[0]); i++)
		if ((jit_flags & jit_flag_names[i].bit) && (b_tree || !jit_flag_names[i].b_only) &&
		    out->nfeatures < TRACER_MAX_FEATURES)
			out->features[out->nfeatures++] = jit_flag_names[i].name;
	qsort(out->features, out->nfeatures, sizeof(out->features[0]), cmp_str);
	/* FNV-1a over jit.vmdef.bcnames: every name padded to 6 characters. */
	for (int i = 0; i < b->nbcnames; i++) {
		char pad[8];

		snprintf(pad, sizeof(pad), "%-6s", b->bcnames[i]);
		for (const char *p = pad; *p; p++)
			h = (h ^ (unsigned char)*p) * 16777619U;
	}
	snprintf(out->bytecode_schema, sizeof(out->bytecode_schema), "%08x", h);
	appendf(out->id, sizeof(out->id), &len, "%s|%lld|%s|%s|", out->luajit_revision,
		out->luajit_version, out->architecture, out->operating_system);
	for (int i = 0; i < out->nfeatures; i++)
		appendf(out->id, sizeof(out->id), &len, "%s%s", i ? "," : "", out->features[i]);
	appendf(out->id, sizeof(out->id), &len, "|%s|%s", out->bytecode_schema,
		out->supported ? "true" : "false");
}

/* ---- open / poll / report / close ------------------------------------------- */

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_WARN && getenv("NUPP_VERBOSE") ? vfprintf(stderr, fmt, ap) : 0;
}

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

static int target_attach(struct tracer *tr, struct tr_target *tg, char *err, size_t errsz)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo);
	const struct lj_target *t = tg->t;
	struct nupp_trace_proc proc = { .lj = t->layout };
	__u32 key = tg->pid;
	__u64 sites[CODE_SITES_MAX_COPIES], offs[CODE_SITES_MAX_COPIES], J;
	int nsites;

	tg->b = lj_target__build(t);
	tg->b_tree = debug_frame_locations(t);
	/* Until the registry fills them: their places in jit_State / GCtrace. */
	if (!proc.lj.J_cur_startins)
		proc.lj.J_cur_startins = proc.lj.J_cur_startpc + 8;
	if (!proc.lj.J_flags)
		proc.lj.J_flags = proc.lj.J_pt + 16;
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
		procmem__read(tg->pid, &tg->jit_flags, 4, J + proc.lj.J_flags);
	}
	if (bpf_map__update_elem(tr->skel->maps.procs, &key, sizeof(key), &proc, sizeof(proc), BPF_ANY)) {
		snprintf(err, errsz, "failed to configure the probe for PID %d: %s", tg->pid, strerror(errno));
		return -1;
	}
	for (tg->nlinks = 0; tg->nlinks < nsites; tg->nlinks++) {
		struct bpf_link *l = bpf_program__attach_uprobe_opts(tr->skel->progs.trace_abort_site,
								    tg->pid, t->path, offs[tg->nlinks], &uo);

		if (getenv("NUPP_VERBOSE"))
			fprintf(stderr, "trace: pid %d: %s site vaddr 0x%llx file offset 0x%llx\n",
				tg->pid, t->path, (unsigned long long)sites[tg->nlinks],
				(unsigned long long)offs[tg->nlinks]);
		if (!l) {
			snprintf(err, errsz, "failed to attach uprobe to %s: %s", t->shown, strerror(errno));
			return -1;
		}
		tg->links[tg->nlinks] = l;
	}
	return 0;
}

int tracer__add_target(struct tracer *tr, const struct lj_target *t, char *err, size_t errsz)
{
	struct tr_target *tg = realloc(tr->tg, (tr->ntg + 1) * sizeof(*tg));

	if (!tg) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	tr->tg = tg;
	tg = &tr->tg[tr->ntg];
	/* The reader reads t's pid, which stays where it is (tg moves). */
	*tg = (struct tr_target){ .pid = t->pid, .t = t,
				  .sym = symbolizer__new(lj_target__build(t), procmem__reader(&t->pid)) };
	if (!tg->sym) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	if (target_attach(tr, tg, err, errsz)) {
		symbolizer__free(tg->sym);
		return -1;
	}
	tr->ntg++;
	return 0;
}

struct tracer *tracer__open(const struct lj_target *targets, int n, bool include_benign,
			    char *err, size_t errsz)
{
	struct tracer *tr = calloc(1, sizeof(*tr));

	if (!tr || n <= 0) {
		snprintf(err, errsz, n <= 0 ? "no target process" : "out of memory");
		goto fail;
	}
	tr->include_benign = include_benign;
	libbpf_set_print(libbpf_quiet);
	tr->skel = trace_bpf__open_and_load();
	if (!tr->skel) {
		snprintf(err, errsz, "failed to load the trace BPF program: %s", strerror(errno));
		goto fail;
	}
	tr->exec_link = bpf_program__attach(tr->skel->progs.on_exec);
	if (!tr->exec_link) {
		snprintf(err, errsz, "failed to attach to sched_process_exec: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < n; i++)
		if (tracer__add_target(tr, &targets[i], err, errsz))
			goto fail;
	tr->rb = ring_buffer__new(bpf_map__fd(tr->skel->maps.events), handle_event, tr, NULL);
	if (!tr->rb) {
		snprintf(err, errsz, "failed to create the ring buffer reader: %s", strerror(errno));
		goto fail;
	}
	clock_gettime(CLOCK_MONOTONIC, &tr->started);
	return tr;
fail:
	tracer__close(tr);
	return NULL;
}

int tracer__set_zone_state(struct tracer *tr, pid_t pid, __u64 zone_state_addr)
{
	struct tr_target *tg = target_of(tr, pid);
	struct nupp_trace_proc proc;
	__u32 key = pid;

	if (!tg)
		return -ESRCH;
	if (bpf_map__lookup_elem(tr->skel->maps.procs, &key, sizeof(key), &proc, sizeof(proc), 0))
		return -errno;
	proc.zone_cur = zone_state_addr ? zone_state_addr + 4 : 0;	/* .current */
	/* BPF_EXIST: an exec since the lookup deleted the entry, and must
	 * find it deleted (tracer__target_execed). */
	if (bpf_map__update_elem(tr->skel->maps.procs, &key, sizeof(key), &proc, sizeof(proc), BPF_EXIST))
		return -errno;
	tg->zone_state = zone_state_addr;
	return 0;
}

static void detach(struct tr_target *tg)
{
	for (int i = 0; i < tg->nlinks; i++)
		bpf_link__destroy(tg->links[i]);
	tg->nlinks = 0;
}

/* Take in tg's events so far, then forget it. Its probe fires no more for a
 * process that exited, and stays attached until tracer__close (destroying a
 * uprobe link waits for an RCU grace period, ~0.15 s). */
static void retire(struct tracer *tr, struct tr_target *tg)
{
	__u32 key = tg->pid;

	ring_buffer__consume(tr->rb);
	bpf_map__delete_elem(tr->skel->maps.procs, &key, sizeof(key), 0);
	tg->gone = true;
}

void tracer__target_gone(struct tracer *tr, pid_t pid)
{
	struct tr_target *tg = target_of(tr, pid);

	if (tg)
		retire(tr, tg);
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
	/* The probe submits without wakeups (each costs ~4 us in the target):
	 * wait out the timeout, then consume whatever is there. */
	int n = ring_buffer__poll(tr->rb, timeout_ms);

	if (n < 0 && n != -EINTR)
		return n;
	return ring_buffer__consume(tr->rb);
}

void tracer__pause(struct tracer *tr, bool paused)
{
	tr->paused = paused;		/* events queued before are dropped too */
	tr->skel->bss->paused = paused;
}

static int severity_rank(const char *s)
{
	return !strcmp(s, "blacklist") ? 0 : !strcmp(s, "warn") ? 1 : 2;
}

static int cmp_site(const void *a, const void *b)
{
	const struct trace_site *x = a, *y = b;
	int c = severity_rank(x->severity) - severity_rank(y->severity);

	if (c)
		return c;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if ((c = strcmp(x->reason, y->reason)))
		return c;
	if ((c = strcmp(x->location, y->location)))
		return c;
	return strcmp(x->zone_path, y->zone_path);
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
	struct timespec now;

	memset(out, 0, sizeof(*out));
	tracer__poll(tr, 0);
	clock_gettime(CLOCK_MONOTONIC, &now);
	out->duration_sec = (now.tv_sec - tr->started.tv_sec) + (now.tv_nsec - tr->started.tv_nsec) / 1e9;
	out->total_aborts = tr->total;
	out->blacklisted = tr->blacklisted;
	out->catalog_id = TRACE_REASONS_CATALOG_ID;
	out->catalog_version = TRACE_REASONS_CATALOG_VERSION;
	out->lost = lost_events(tr);
	tracer__profile(tr->tg[0].t, tr->tg[0].jit_flags, &out->profile);
	out->sites = calloc(tr->nsites ? tr->nsites : 1, sizeof(*out->sites));
	if (!out->sites)
		return -ENOMEM;
	for (size_t i = 0; i < tr->nsites; i++) {
		const struct trace_site *s = &tr->sites[i].s;
		struct trace_site *d = &out->sites[out->nsites++];

		*d = *s;
		d->reason = xstrdup(s->reason);
		d->reason_id = xstrdup(s->reason_id);
		d->raw_reason = xstrdup(s->raw_reason);
		d->location = xstrdup(s->location);
		d->zone_path = xstrdup(s->zone_path);
		if (!d->reason || !d->reason_id || !d->raw_reason || !d->location || !d->zone_path) {
			trace_report__free(out);
			return -ENOMEM;
		}
	}
	qsort(out->sites, out->nsites, sizeof(*out->sites), cmp_site);
	return 0;
}

static void site_free(struct trace_site *s)
{
	free(s->reason);
	free(s->reason_id);
	free(s->raw_reason);
	free(s->location);
	free(s->zone_path);
}

void trace_report__free(struct trace_report *r)
{
	for (size_t i = 0; i < r->nsites; i++)
		site_free(&r->sites[i]);
	free(r->sites);
	r->sites = NULL;
	r->nsites = 0;
}

/* One RFC 4180 field: quoted when it holds a comma, quote, CR or LF. */
static int csv_field(FILE *f, const char *s, bool last)
{
	if (strpbrk(s, ",\"\r\n")) {
		fputc('"', f);
		for (; *s; s++) {
			if (*s == '"')
				fputc('"', f);
			fputc(*s, f);
		}
		fputc('"', f);
	} else {
		fputs(s, f);
	}
	return fputs(last ? "\r\n" : ",", f) < 0 ? -EIO : 0;
}

int trace_report__write_csv(const struct trace_report *r, FILE *f)
{
	char count[32];

	fputs("severity,count,reason,reasonId,reasonClass,rawReason,location,zonePath\r\n", f);
	for (size_t i = 0; i < r->nsites; i++) {
		const struct trace_site *s = &r->sites[i];

		snprintf(count, sizeof(count), "%llu", s->count);
		csv_field(f, s->severity, false);
		csv_field(f, count, false);
		csv_field(f, s->reason, false);
		csv_field(f, s->reason_id, false);
		csv_field(f, s->reason_class, false);
		csv_field(f, s->raw_reason, false);
		csv_field(f, s->location, false);
		csv_field(f, s->zone_path, true);
	}
	return ferror(f) ? -EIO : 0;
}

void tracer__close(struct tracer *tr)
{
	if (!tr)
		return;
	ring_buffer__free(tr->rb);
	for (int i = 0; i < tr->ntg; i++) {
		detach(&tr->tg[i]);
		symbolizer__free(tr->tg[i].sym);
	}
	bpf_link__destroy(tr->exec_link);
	trace_bpf__destroy(tr->skel);
	for (size_t i = 0; i < tr->nsites; i++)
		site_free(&tr->sites[i].s);
	free(tr->sites);
	free(tr->tg);
	free(tr);
}
