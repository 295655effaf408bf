// SPDX-License-Identifier: MIT
/*
 * fuzz_writers.c - the two text writers, over names and zone paths the
 * fuzzer makes: profile__write_collapsed (user/profile/profile.c) and the trace
 * aborts' CSV, trace_report__write_csv (user/trace/trace_report.c). Names are arbitrary
 * bytes, ';', '"', commas, CR, LF and all, as a target's chunknames, zone
 * paths and error messages may be; a NUL cuts one, as it cuts every C string
 * the writers take. Frame names come escaped, as the symbolizer renders them
 * (strbuf__put_escaped); zone paths come raw, as a target registers them. Whatever
 * they hold, the collapsed stacks are one line per distinct stack, "TEXT
 * COUNT" with no control character in TEXT, the counts add up to the
 * samples, and each row's text has one frame per frame it keeps (its thread
 * and zone frames, its stack cut at --root); the CSV parses back as RFC 4180
 * to the header and to exactly the fields written.
 *
 * Input: options (bit 0 --threads, 1 --zones, 2 --root, 3 --zone), the
 * --root and --zone strings, then rows (zone path, frame names, counts by
 * state) and abort sites (eight fields), strings as a length byte and bytes.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile/profile.h"
#include "luajit/symbolize.h"
#include "../../user/trace/trace.h"

#define FIELDS 8	/* of a CSV row */

struct input {
	const uint8_t *p;
	size_t left;
};

static unsigned take(struct input *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

/* A string of up to 255 bytes, cut at a NUL; malloc'ed. */
static char *take_str(struct input *in)
{
	size_t n = take(in);

	if (n > in->left)
		n = in->left;
	char *s = strndup((const char *)in->p, n);
	in->p += n;
	in->left -= n;
	if (!s)
		abort();
	return s;
}

static void fail(const char *what, const char *text)
{
	fprintf(stderr, "fuzz_writers: %s: \"%s\"\n", what, text);
	abort();
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == c;
	return n;
}

/* ---------------------------------------------------------------------------
 * Collapsed stacks
 */

static void add_rows(struct profile *p, struct input *in)
{
	int nrows = take(in) % 8;

	for (int r = 0; r < nrows; r++) {
		char *zone = take_str(in);
		__u32 ids[4], n = take(in) % 4 + 1;	/* a sampled stack has a frame */
		long row;

		for (__u32 i = 0; i < n; i++) {
			char *raw = take_str(in);
			struct strbuf name = { 0 };
			struct profile_frame f = { .file = "" };

			if (strbuf__put_escaped(&name, raw, strlen(raw)))
				abort();
			f.name = name.buf;
			f.kind = take(in) % 4;
			ids[i] = profile__frame(p, &f);
			strbuf__free(&name);
			free(raw);
		}
		row = profile__add(p, take(in), take(in), 0x1000, zone, ids, n);
		free(zone);
		if (row < 0)
			abort();
		for (int s = 0; s < NUPP_ST_MAX; s++)
			p->rows[row].state[s] = take(in) % 4;
	}
}

/* Each kept row's text: one frame per frame it keeps. */
static void check_row_texts(const struct profile *p, const struct render_opts *o)
{
	const struct profile_row *r;

	for (size_t i = 0; (r = profile__next_kept(p, o, &i));) {
		char *owned;
		const char *text = profile_row__text(r, o, &owned);
		size_t frames;

		frames = o->threads + (o->zones && r->zone[0]) +
			 r->nframes - profile_row__first_frame(p, r, o->root);
		if (count_char(text, ';') != frames - 1)
			fail("a row's text with more or fewer frames than it keeps", text);
		free(owned);
	}
}

static void check_collapsed(const struct profile *p, const struct render_opts *o)
{
	char *buf = NULL, *line;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	__u64 samples = 0, sum = 0, want[NUPP_ST_MAX], total = 0;
	long n, lines = 0;

	if (!f)
		abort();
	n = profile__write_collapsed(p, o, f, &samples);
	fclose(f);
	if (n < 0)
		fail("a write that failed", "");
	profile__totals(p, o, want);
	for (int s = 0; s < NUPP_ST_MAX; s++)
		total += want[s];
	for (line = buf; *line; lines++) {
		char *end = strchr(line, '\n'), *sp, *digits;

		if (!end)
			fail("a line without its end", line);
		*end = '\0';
		sp = strrchr(line, ' ');
		if (!sp || !sp[1])
			fail("a line without its count", line);
		sum += strtoull(sp + 1, &digits, 10);
		if (*digits)
			fail("a count that is not a number", line);
		for (char *c = line; c < sp; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				fail("a control character in a stack", line);
		line = end + 1;
	}
	if (lines != n)
		fail("more or fewer lines than distinct stacks", buf);
	if (sum != samples || samples != total)
		fail("counts that do not add up to the samples", buf);
	free(buf);
}

/* ---------------------------------------------------------------------------
 * The abort CSV
 */

/* The next RFC 4180 field of *s into out (malloc'ed); its terminator (',',
 * '\r' of CRLF, or '\0' at the end), or -1 when the text is not RFC 4180. */
static int csv_next(const char **s, char **out)
{
	const char *p = *s;
	size_t cap = strlen(p) + 1, n = 0;
	char *f = malloc(cap);

	if (!f)
		abort();
	if (*p == '"') {
		for (p++;; p++) {
			if (!*p)
				goto bad;
			if (*p == '"' && p[1] != '"')
				break;
			if (*p == '"')
				p++;
			f[n++] = *p;
		}
		p++;
	} else {
		for (; *p && *p != ',' && *p != '\r'; p++) {
			if (*p == '"' || *p == '\n')
				goto bad;
			f[n++] = *p;
		}
	}
	f[n] = '\0';
	if (*p == '\r' && p[1] != '\n')
		goto bad;
	if (*p && *p != ',' && *p != '\r')
		goto bad;
	*out = f;
	*s = *p == '\r' ? p + 2 : *p ? p + 1 : p;
	return *p;
bad:
	free(f);
	return -1;
}

/* One record of FIELDS fields, equal to want (NULL: not compared). */
static void csv_record(const char **s, const char *const *want, const char *text)
{
	for (int i = 0; i < FIELDS; i++) {
		char *got;
		int end = csv_next(s, &got);

		if (end < 0)
			fail("CSV that is not RFC 4180", text);
		if (end != (i + 1 < FIELDS ? ',' : '\r'))
			fail("a record with more or fewer fields", text);
		if (want && strcmp(got, want[i]))
			fail("a field that does not parse back", got);
		free(got);
	}
}

static void check_csv(struct input *in)
{
	static const char *const header[FIELDS] = {
		"severity", "count", "reason", "reasonId", "reasonClass", "rawReason", "location", "zonePath",
	};
	struct trace_site sites[4];
	char *fields[4][FIELDS], count[4][24], *buf = NULL;
	struct trace_report r = { .sites = sites, .nsites = take(in) % 5 };
	size_t len = 0;
	const char *s;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		abort();
	for (size_t i = 0; i < r.nsites; i++) {
		for (int k = 0; k < FIELDS; k++)
			fields[i][k] = take_str(in);
		sites[i] = (struct trace_site){
			.severity = fields[i][0], .count = take(in) * 1000003ULL,
			.reason = fields[i][2], .reason_id = fields[i][3],
			.reason_class = fields[i][4], .raw_reason = fields[i][5],
			.location = fields[i][6], .zone_path = fields[i][7],
		};
		snprintf(count[i], sizeof(count[i]), "%llu", sites[i].count);
	}
	if (trace_report__write_csv(&r, f))
		fail("a write that failed", "");
	fclose(f);
	s = buf;
	csv_record(&s, header, buf);
	for (size_t i = 0; i < r.nsites; i++) {
		const char *want[FIELDS];

		memcpy(want, fields[i], sizeof(want));
		want[1] = count[i];
		csv_record(&s, want, buf);
		for (int k = 0; k < FIELDS; k++)
			free(fields[i][k]);
	}
	if (*s)
		fail("more records than sites", buf);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	unsigned opts = take(&in);
	char *root = take_str(&in), *zone = take_str(&in);
	struct render_opts o = {
		.threads = opts & 1, .zones = opts & 2,
		.root = opts & 4 ? root : NULL, .zone = opts & 8 ? zone : NULL,
	};
	struct profile p = { 0 };

	add_rows(&p, &in);
	check_row_texts(&p, &o);
	check_collapsed(&p, &o);
	profile__free(&p);
	free(root);
	free(zone);
	check_csv(&in);
	return 0;
}
