// SPDX-License-Identifier: MIT
/*
 * trace_report.c - a trace-abort report: its sites' strings and order, the
 * recorder's identity, the CSV. No BPF here: the collector (trace.c) adds
 * the sites up, the outputs read the report.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "trace_reasons.h"
#include "trace_report.h"
#include "base/util.h"

/* printf at buf + *len, moving *len on; what does not fit in sz is cut. */
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

/* ---- sites ------------------------------------------------------------------ */

/* One block for the five strings: copied as one, freed as one. */
int trace_site__set_strings(struct trace_site *s, const char *reason, const char *reason_id,
			    const char *raw_reason, const char *location, const char *zone_path)
{
	const char *from[] = { reason, reason_id, raw_reason, location, zone_path };
	char **to[] = { &s->reason, &s->reason_id, &s->raw_reason, &s->location, &s->zone_path };
	size_t len[5], total = 0;
	char *block;

	for (int i = 0; i < 5; i++)
		total += (len[i] = (from[i] ? strlen(from[i]) : 0) + 1);
	block = malloc(total);
	for (int i = 0; i < 5; i++) {
		*to[i] = block ? memcpy(block, from[i] ? from[i] : "", len[i]) : NULL;
		block = block ? block + len[i] : NULL;
	}
	return s->reason ? 0 : -ENOMEM;
}

void trace_site__free(struct trace_site *s)
{
	free(s->reason);	/* with the other strings */
}

int trace_site__cmp(const void *a, const void *b)
{
	const struct trace_site *x = a, *y = b;
	int c = trace_severity_rank(x->severity) - trace_severity_rank(y->severity);

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

/* ---- the recorder's identity ----------------------------------------------- */

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

void trace_profile__fill(const struct lj_target *t, __u32 jit_flags, struct trace_profile *out)
{
	const struct lj_build *b = lj_target__build(t);
	bool b_tree = b->tree && !strcmp(b->tree, "luajit2");
	__u32 h = FNV1A32_INIT;
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
		h = fnv1a32(h, pad, strlen(pad));
	}
	snprintf(out->bytecode_schema, sizeof(out->bytecode_schema), "%08x", h);
	appendf(out->id, sizeof(out->id), &len, "%s|%lld|%s|%s|", out->luajit_revision,
		out->luajit_version, out->architecture, out->operating_system);
	for (int i = 0; i < out->nfeatures; i++)
		appendf(out->id, sizeof(out->id), &len, "%s%s", i ? "," : "", out->features[i]);
	appendf(out->id, sizeof(out->id), &len, "|%s|%s", out->bytecode_schema,
		out->supported ? "true" : "false");
}

/* ---- the report ------------------------------------------------------------- */

void trace_report__free(struct trace_report *r)
{
	for (size_t i = 0; i < r->nsites; i++)
		trace_site__free(&r->sites[i]);
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

