// SPDX-License-Identifier: MIT
/*
 * abort_site.c - what an abort's site says, from the probe's event.
 *
 * Its location, its reason and whether it blacklisted are derived the way
 * jit/v.lua derives them in the target (lj_debug.c, lib_jit.c), its zone
 * path from the zone module's table; the target is read only for what the
 * probe could not capture.
 */
#include <stdio.h>
#include <string.h>
#include "abort_site.h"
#include "base/procmem.h"
#include "trace_reasons.h"

#define STR_MAX		4096		/* longest chunk name or message read */

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

/* lj_debug_pushloc(): what jit.util.funcinfo(fn, pos).loc holds, for the
 * chunk name of length len whose first character is name0 and whose bytes
 * from offset off on are name (NUL-terminated). -1 when those bytes do not
 * hold what the location shows (the end of a long name, without the '/'
 * that starts its file name). */
int abort_site__fmt_loc(__u64 pt, __s32 first, int line, char name0, const char *name, size_t off,
			size_t len, char *out, size_t outsz)
{
	if (first == -1) {
		if (off)
			return -1;
		snprintf(out, outsz, "builtin:%s", name);
	} else if (name0 == '@') {
		/* From the end down to the third character: the last '/' or '\'. */
		const char *base = off ? NULL : name + 1;

		for (size_t j = len; j-- > 2 && j >= off;)
			if (name[j - off] == '/' || name[j - off] == '\\') {
				base = name + (j + 1 - off);
				break;
			}
		if (!base)
			return -1;
		snprintf(out, outsz, "%s:%d", base, line);
	} else if (len > 40) {
		char p[SYMBOLIZE_PTR_MAX];

		symbolize__fmt_ptr(p, pt);
		snprintf(out, outsz, "%s:%d", p, line);
	} else if (off) {
		return -1;
	} else if (name0 == '=') {
		snprintf(out, outsz, "%s:%d", name + 1, line);
	} else {
		snprintf(out, outsz, "\"%s\":%d", name, line);
	}
	return 0;
}

/* The same, read from the target now. */
static int proto_loc(const struct abort_source *src, __u64 pt, __u32 pos, char *out, size_t outsz)
{
	const struct lj_layout *lj = &src->b->layout;
	static char name[STR_MAX];
	__u64 cn;
	__s32 first;
	int len, line;

	if (procmem__read(src->pid, &cn, 8, pt + lj->pt_chunkname) ||
	    procmem__read(src->pid, &first, 4, pt + lj->pt_firstline))
		return -1;
	len = read_gcstr(src->pid, lj, cn & LJ_GCVMASK, name, sizeof(name));
	line = symbolizer__line(src->sym, pt, pos);	/* lj_debug_line() */
	if (len < 0 || line < 0)
		return -1;
	return abort_site__fmt_loc(pt, first, line, name[0], name, 0, len, out, outsz);
}

/* jit/v.lua abort_site__fmtfunc() of a builtin (by name) or C function ("C:addr"). */
static void fmt_cfunc(const struct lj_build *b, __u8 ffid, __u64 f, char *out, size_t outsz)
{
	const char *name = ffid > 1 ? table_name(b->ffnames, b->nffnames, ffid) : NULL;

	if (name)
		snprintf(out, outsz, "%s", name);
	else
		snprintf(out, outsz, "C:%llx", (unsigned long long)f);
}

/* jit/v.lua abort_site__fmtfunc(func, pc), read from the target now. pos is the int
 * the vmevent carried. */
void abort_site__fmtfunc(const struct abort_source *src, __u64 fn, __s32 pos, char *out, size_t outsz)
{
	const struct lj_layout *lj = &src->b->layout;
	__u8 ffid;
	__u64 v;

	if (procmem__read(src->pid, &ffid, 1, fn + lj->fn_ffid))
		goto unknown;
	if (ffid == 0) {
		if (procmem__read(src->pid, &v, 8, fn + lj->fn_pc) ||
		    proto_loc(src, v - lj->pt_size, (__u32)pos, out, outsz))
			goto unknown;
		return;
	}
	if (procmem__read(src->pid, &v, 8, fn + lj->fn_f))
		goto unknown;
	fmt_cfunc(src->b, ffid, v, out, outsz);
	return;
unknown:
	snprintf(out, outsz, "(?)");
}

/* The abort's location from what the probe captured (bpf/trace.bpf.c found
 * it as the target's trace_abort() does); the target is read only for what
 * the probe could not read or keep, a chunk name's start beyond its end. */
void abort_site__location(const struct abort_source *src, const struct nupp_trace_event *e,
			   char *out, size_t outsz)
{
	const struct nupp_trace_loc *l = &e->loc;
	char name[NUPP_TRACE_NAME + 1];
	size_t n;

	if (!(l->have & NUPP_LOC_FN))
		goto unknown;
	if (l->ffid != 0) {
		fmt_cfunc(src->b, l->ffid, l->f, out, outsz);
		return;
	}
	if (l->have & NUPP_LOC_NAME) {
		n = l->namelen < NUPP_TRACE_NAME ? l->namelen : NUPP_TRACE_NAME;
		memcpy(name, l->name, n);
		name[n] = 0;
		if (!abort_site__fmt_loc(l->pt, l->firstline, l->line, l->name0, name, l->namelen - n,
			     l->namelen, out, outsz))
			return;
	}
	if (!proto_loc(src, l->pt, (__u32)l->pos, out, outsz))
		return;
unknown:
	snprintf(out, outsz, "(?)");
}

/* ---- reasons ------------------------------------------------------------- */

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

/* The traceerr template of e's error (its number in *err, -1 for a Lua
 * error object), as the catalog knows it; NULL for a number out of the
 * build's table. */
static const char *reason_template(const struct lj_build *b, const struct nupp_trace_event *e, int *err)
{
	const char *tmpl;

	if (!tv_int(e->errobj, err))
		*err = -1;
	if (*err < 0)
		return table_name(b->traceerr, b->ntraceerr, 0);
	tmpl = table_name(b->traceerr, b->ntraceerr, *err);
	/* Since 2023 LuaJIT writes "NYI: bytecode %s" (jit.v fills in the
	 * name); the catalog and the raw text keep the number's form. */
	if (tmpl && !strcmp(tmpl, "NYI: bytecode %s"))
		tmpl = "NYI: bytecode %d";
	return tmpl;
}

const struct trace_reason *abort_site__row(const struct abort_source *src,
					   const struct nupp_trace_event *e)
{
	int err;
	const char *tmpl = reason_template(src->b, e, &err);

	return tmpl ? trace_reason__by_text(tmpl) : NULL;
}

void abort_site__reason(const struct abort_source *src, const struct nupp_trace_event *e,
			 struct abort_reason *r)
{
	const struct lj_build *b = src->b;
	const struct trace_reason *row;
	const char *tmpl = reason_template(b, e, &r->err), *detail = NULL;
	char arg[ABORT_SITE_TEXT_MAX] = "";

	if (r->err < 0) {
		/* A Lua error object: jit.v prints it as it is. */
		if ((__u32)((__s64)e->errobj >> 47) == LJ_TSTR) {
			size_t n = e->msglen < NUPP_TRACE_MSG ? e->msglen : NUPP_TRACE_MSG;

			if (e->msglen > NUPP_TRACE_MSG &&
			    read_gcstr(src->pid, &b->layout, e->errobj & LJ_GCVMASK, r->raw, sizeof(r->raw)) >= 0)
				n = strlen(r->raw);
			else
				memcpy(r->raw, e->msg, n), r->raw[n] = 0;
		} else {
			snprintf(r->raw, sizeof(r->raw), "(error object)");
		}
		/* reason is the traceerr text (RECERR); the message is rawReason. */
		snprintf(r->reason, sizeof(r->reason), "%s", tmpl ? tmpl : r->raw);
	} else {
		if (!tmpl) {
			snprintf(r->raw, sizeof(r->raw), "trace error %d", r->err);
			snprintf(r->reason, sizeof(r->reason), "%s", r->raw);
		} else {
			int n = 0;

			tv_int(e->errinfo, &n);

			if (e->info_ffid != 0 && e->info_ffid != 0xff)
				fmt_cfunc(b, e->info_ffid, e->info_f, arg, sizeof(arg));
			else if ((__u32)((__s64)e->errinfo >> 47) == LJ_TFUNC)
				abort_site__fmtfunc(src, e->errinfo & LJ_GCVMASK, 0, arg, sizeof(arg));
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
	r->row = row;
	if (row) {
		snprintf(r->id, sizeof(r->id), "%s%s%s", row->id, detail ? "." : "", detail ? detail : "");
		r->cls = row->cls;
	} else {
		snprintf(r->id, sizeof(r->id), TRACE_REASON_UNKNOWN_ID);
		r->cls = TRACE_REASON_UNKNOWN_CLASS;
	}
}

/* Did this abort blacklist its start bytecode? blacklist_pc() has run by the
 * probe point: the start instruction changed from OP to IOP (FORL -> IFORL,
 * ITERL -> IITERL, LOOP -> ILOOP, FUNCF -> IFUNCF, FUNCV -> IFUNCV) or from
 * ITERN to ITERC. Only root traces (parent 0, exitno 0) are penalized. */
bool abort_site__blacklisted(const struct abort_source *src, const struct nupp_trace_event *e)
{
	const struct lj_build *b = src->b;
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

void abort_site__zone_path(const struct abort_source *src, __u32 id, char *out, size_t outsz)
{
	__u32 npaths;
	__u64 paths, p;

	out[0] = 0;
	if (!id || !src->zone_state ||
	    procmem__read(src->pid, &npaths, 4, src->zone_state + 16) || id > npaths ||
	    procmem__read(src->pid, &paths, 8, src->zone_state + 24) ||
	    procmem__read(src->pid, &p, 8, paths + 8ULL * id))
		return;
	/* Read byte-wise bounded chunks: the string may end near a page end. */
	for (size_t n = 0; n + 1 < outsz && n < ABORT_SITE_ZONE_MAX; n++) {
		if (procmem__read(src->pid, out + n, 1, p + n) || !out[n]) {
			out[n] = 0;
			return;
		}
		out[n + 1] = 0;
	}
}
