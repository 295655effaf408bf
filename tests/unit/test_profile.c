// SPDX-License-Identifier: MIT
/*
 * test_profile.c - the zone filter, root cut and zone frames of
 * user/profile/profile.c, and the flame graph's tree of its rows, without root or
 * BPF. The zone filter's cases are
 * tests/fixtures/zone_filter.tsv, which tests/lua_api/test_lua_api.py runs through
 * the Lua API's filter too: one rule for `--zone` and
 * profile.sample{zone = ...}.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile/flamegraph.h"
#include "profile/profile.h"
#include "luajit/symbolize.h"

static int failed, passed;

static void zone_cases(const char *path)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f) {
		perror(path);
		exit(2);
	}
	while (fgets(line, sizeof(line), f)) {
		char *zone = line, *filter, *want;

		if (line[0] == '#')
			continue;
		line[strcspn(line, "\n")] = '\0';
		filter = strchr(zone, '\t');
		want = filter ? strchr(filter + 1, '\t') : NULL;
		if (!want)
			continue;
		*filter++ = '\0';
		*want++ = '\0';
		n++;
		if (zone__under(zone, filter) == (atoi(want) == 1)) {
			passed++;
		} else {
			failed++;
			printf("FAIL zone__under(\"%s\", \"%s\") != %s\n", zone, filter, want);
		}
	}
	fclose(f);
	printf("%-4s zone filter, %d cases\n", failed ? "FAIL" : "ok", n);
}

static void cut_cases(void)
{
	static const struct { const char *stack, *root, *want; } v[] = {
		{ "a.lua:0;m.lua:run;m.lua:f", "m.lua", "m.lua:run;m.lua:f" },
		{ "m.lua:run;x.lua:g", "m.lua", "m.lua:run;x.lua:g" },
		{ "a.lua:0;b.lua:f", "m.lua", "a.lua:0;b.lua:f" },
		{ "a.lua:0;mm.lua:f", "m.lua", "a.lua:0;mm.lua:f" },
		{ ";;;:x", ";;", ";;;:x" },	/* a root with ';' spans frames */
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		const char *got = stack__cut_root(v[i].stack, v[i].root);

		if (!strcmp(got, v[i].want)) {
			passed++;
		} else {
			failed++;
			printf("FAIL stack__cut_root(\"%s\", \"%s\") = \"%s\"\n", v[i].stack, v[i].root, got);
		}
	}
	printf("ok   root cut\n");
}

/* A zone path is the target's own string: a ';' or newline in it must not
 * split the collapsed line (tests/fuzz/corpus/writers). */
static void zone_frame_cases(void)
{
	static const struct { const char *zone, *want; } v[] = {
		{ "frame/render", "[zone frame/render];m.lua:f 3\n" },
		{ "a;b\nc\\", "[zone a\\x3bb\\x0ac\\x5c];m.lua:f 3\n" },
	};
	struct render_opts o = { .zones = true };

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct profile p = { 0 };
		struct profile_frame f = { .name = "m.lua:f", .file = "m.lua" };
		__u32 id = profile__frame(&p, &f);
		long row = profile__add(&p, 1, 1, 0, v[i].zone, &id, 1);
		char *got = NULL;
		size_t len = 0;
		FILE *out = open_memstream(&got, &len);

		p.rows[row].state[NUPP_ST_INTERP] = 3;
		profile__write_collapsed(&p, &o, out, NULL);
		fclose(out);
		if (!strcmp(got, v[i].want)) {
			passed++;
		} else {
			failed++;
			printf("FAIL zone frame of \"%s\": \"%s\"\n", v[i].zone, got);
		}
		free(got);
		profile__free(&p);
	}
	printf("ok   zone frames\n");
}

/* Collapsed stacks: rows of one text (two threads' "a;b") merged into one
 * line, lines by count descending, ties by text ("a!x" before "a;b"), each
 * count written in full. */
static void collapse_cases(void)
{
	static const struct { const char *stack[2]; int n; __u32 tid; __u64 count; } rows[] = {
		{ { "a", "b" }, 2, 1, 2 }, { { "c" }, 1, 1, 12345678901ULL }, { { "a!x" }, 1, 2, 5 },
		{ { "a", "b" }, 2, 2, 3 }, { { "d" }, 1, 1, 1 },
	};
	static const char want[] = "c 12345678901\na!x 5\na;b 5\nd 1\n";
	struct profile p = { 0 };
	struct render_opts o = { 0 };
	char *got = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&got, &len);
	__u64 samples = 0;
	long lines;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		__u32 ids[2];
		long row;

		for (int k = 0; k < rows[i].n; k++) {
			struct profile_frame f = { .name = (char *)rows[i].stack[k], .file = "" };

			ids[k] = profile__frame(&p, &f);
		}
		row = profile__add(&p, 1, rows[i].tid, 0, "", ids, rows[i].n);
		p.rows[row].state[NUPP_ST_INTERP] = rows[i].count;
	}
	lines = profile__write_collapsed(&p, &o, out, &samples);
	fclose(out);
	if (lines == 4 && samples == 12345678912ULL && !strcmp(got, want)) {
		passed++;
	} else {
		failed++;
		printf("FAIL collapsed: %ld lines, %llu samples:\n%s", lines,
		       (unsigned long long)samples, got);
	}
	free(got);
	profile__free(&p);
	printf("ok   collapsed merging and order\n");
}

/* The order of many lines with long common prefixes, ties and bytes above
 * 0x7f (the sort reads texts a byte at a time): the same as sorting the
 * merged texts with strcmp, then by count. */
struct text_count {
	char *text;
	__u64 count;
};

static int by_text(const void *a, const void *b)
{
	return strcmp(((const struct text_count *)a)->text, ((const struct text_count *)b)->text);
}

static int by_count_then_text(const void *a, const void *b)
{
	const struct text_count *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return strcmp(x->text, y->text);
}

static void collapse_order_cases(void)
{
	static const char *const names[] = {
		"luajit+0x92c0", "large.lua:0", "h_1.lua:2", "h_10.lua:2", "h_1", "h", "\xc3\xa9.lua:1",
		"a!x", "[unknown]", "m.lua:f:12", "m.lua:f:2",
	};
	enum { ROWS = 5000, NAMES = sizeof(names) / sizeof(names[0]) };
	struct text_count *want = calloc(ROWS, sizeof(*want));
	struct profile p = { 0 };
	struct render_opts o = { 0 };
	struct strbuf expect = { 0 };
	unsigned long long seed = 88172645463325252ULL;
	char *got = NULL;
	size_t len = 0, n = 0;
	FILE *out = open_memstream(&got, &len);
	bool bad;

	for (int i = 0; i < ROWS; i++) {
		__u32 ids[6];
		int depth;
		char text[256] = "";
		long row;

		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		depth = 1 + seed % 6;
		for (int k = 0; k < depth; k++) {
			const char *name = names[(seed >> (8 + 4 * k)) % NAMES];
			struct profile_frame f = { .name = (char *)name, .file = "" };

			ids[k] = profile__frame(&p, &f);
			strcat(strcat(text, k ? ";" : ""), name);
		}
		row = profile__add(&p, 1, 1 + i % 3, 0, "", ids, depth);
		p.rows[row].state[NUPP_ST_INTERP] = 1 + (seed >> 40) % 3;
		want[i] = (struct text_count){ strdup(text), p.rows[row].state[NUPP_ST_INTERP] };
	}
	qsort(want, ROWS, sizeof(*want), by_text);
	for (size_t i = 0; i < ROWS; i++) {
		if (n && !strcmp(want[n - 1].text, want[i].text)) {
			want[n - 1].count += want[i].count;
			free(want[i].text);
			continue;
		}
		want[n++] = want[i];
	}
	qsort(want, n, sizeof(*want), by_count_then_text);
	for (size_t i = 0; i < n; i++) {
		char count[32];

		snprintf(count, sizeof(count), " %llu\n", (unsigned long long)want[i].count);
		strbuf__puts(&expect, want[i].text);
		strbuf__puts(&expect, count);
		free(want[i].text);
	}
	profile__write_collapsed(&p, &o, out, NULL);
	fclose(out);
	bad = n < 100 || strcmp(got, expect.buf);
	if (bad)
		failed++;
	else
		passed++;
	printf("%-4s collapsed order of %zu lines, as strcmp orders them\n", bad ? "FAIL" : "ok", n);
	free(got);
	free(want);
	strbuf__free(&expect);
	profile__free(&p);
}

/* The flame graph merges the rows' frames into one tree: each frame once
 * under its caller, whatever order the rows come in ("a!x" sorts between
 * "a" and "a;b"), and two frames of one name under two callers apart. */
static void flamegraph_tree_cases(void)
{
	static const struct { const char *stack[2]; int n; __u64 count; } rows[] = {
		{ { "a", "b" }, 2, 2 }, { { "a!x", "b" }, 2, 3 }, { { "a", "c" }, 2, 4 },
		{ { "a" }, 1, 1 }, { { "a", "b" }, 2, 5 },
	};
	static const char *const want[] = {
		"<title>all (15 samples", "<title>a (12 samples", "<title>a!x (3 samples",
		"<title>b (7 samples", "<title>b (3 samples", "<title>c (4 samples",
	};
	struct profile p = { 0 };
	struct render_opts o = { 0 };
	char *svg = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&svg, &len);
	int bad = 0;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		__u32 ids[2];
		long row;

		for (int k = 0; k < rows[i].n; k++) {
			struct profile_frame f = { .name = (char *)rows[i].stack[k], .file = "" };

			ids[k] = profile__frame(&p, &f);
		}
		row = profile__add(&p, 1, (__u32)i + 1, 0, "", ids, (__u32)rows[i].n);
		p.rows[row].state[NUPP_ST_INTERP] = rows[i].count;
	}
	if (flamegraph__write(&p, &o, out))
		bad = printf("FAIL flamegraph__write\n");
	fclose(out);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]) && !bad; i++) {
		const char *at = strstr(svg, want[i]);

		if (!at || strstr(at + 1, want[i]))
			bad = printf("FAIL the flame graph has %s \"%s\" frame\n",
				     at ? "more than one" : "no", want[i]);
	}
	if (!bad && (strstr(svg, "<title>a (2 samples") || strstr(svg, "<title>a (5 samples")))
		bad = printf("FAIL the flame graph splits frame a\n");
	if (bad)
		failed++;
	else
		passed++;
	free(svg);
	profile__free(&p);
	printf("%-4s flame graph tree\n", bad ? "FAIL" : "ok");
}

/* The flame graph's numbers, written by hand, read as printf's %.1f and
 * %.2f write them, exact ties to even: 16 samples, of which 1, 3 and 12
 * (6.25 % and 18.75 %: ties; 73.75 px wide). */
static void flamegraph_number_cases(void)
{
	static const struct { const char *name; __u64 count; } rows[] = {
		{ "p", 1 }, { "q", 3 }, { "r", 12 },
	};
	static const char *const want[] = {
		"<title>all (16 samples, 100.0%; interpreted 100.0%)</title>",
		"data-n=\"p\" data-o=\"0\" data-s=\"1\" data-l=\"1\" data-st=\"0,1,0,0,0\">"
		"<title>p (1 samples, 6.2%; interpreted 100.0%)</title><rect x=\"10.00\" y=\"84\" "
		"width=\"73.75\" height=\"15\"",
		"<title>q (3 samples, 18.8%; interpreted 100.0%)</title><rect x=\"83.75\" y=\"84\" "
		"width=\"221.25\" height=\"15\"",
		"<title>r (12 samples, 75.0%; interpreted 100.0%)</title><rect x=\"305.00\" y=\"84\" "
		"width=\"885.00\" height=\"15\"",
		"<text x=\"86.75\" y=\"94\">q</text>",
	};
	struct profile p = { 0 };
	struct render_opts o = { 0 };
	char *svg = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&svg, &len);
	int bad = 0;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct profile_frame f = { .name = (char *)rows[i].name, .file = "" };
		__u32 id = profile__frame(&p, &f);
		long row = profile__add(&p, 1, (__u32)i + 1, 0, "", &id, 1);

		p.rows[row].state[NUPP_ST_INTERP] = rows[i].count;
	}
	if (flamegraph__write(&p, &o, out))
		bad = printf("FAIL flamegraph__write\n");
	fclose(out);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]) && !bad; i++)
		if (!strstr(svg, want[i]))
			bad = printf("FAIL the flame graph has no \"%s\"\n", want[i]);
	if (bad)
		failed++;
	else
		passed++;
	free(svg);
	profile__free(&p);
	printf("%-4s flame graph numbers\n", bad ? "FAIL" : "ok");
}

int main(int argc, char **argv)
{
	zone_cases(argc > 1 ? argv[1] : "tests/fixtures/zone_filter.tsv");
	cut_cases();
	zone_frame_cases();
	collapse_cases();
	collapse_order_cases();
	flamegraph_tree_cases();
	flamegraph_number_cases();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
