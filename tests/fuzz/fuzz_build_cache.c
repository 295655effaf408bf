// SPDX-License-Identifier: MIT
/*
 * fuzz_build_cache.c - the reader of the build cache (user/luajit/build_cache.c),
 * over entry files the fuzzer makes: random bytes, and mutations of the
 * entries in tests/fuzz/corpus/build_cache (written by `nupp-bpf inspect`
 * with NUPP_CACHE_DIR set: a registry build's sites, derived builds whose
 * layout comes from DWARF, the revision table or one of its option
 * variants, and truncated or edited copies of them). An input is the whole
 * file, read through a FILE * as a cache file is (build_cache__parse). The
 * build asked for is the one the input names, its first file-size and
 * debug-file lines, so that an entry can be taken at all; the same input for
 * a file one byte longer, or for another debug file, is never taken. An
 * entry taken holds what its users index and print without checking: at
 * most CODE_SITES_MAX_COPIES - 1 more abort sites; reasons, version text
 * and options NUL-terminated, with no line break; a derived build has a fork
 * and a sites origin nupp-bpf names, one to LJ_DERIVE_MAX_CANDS candidates,
 * each with a known origin, a revision of the table or none, and a layout
 * that is that revision's, one of its variants' or the entry's own DWARF
 * layout (in the caller's struct, not the reader's). The revision table an
 * entry was written for is part of what it names, too: the target reads each
 * input also with its table line's digest made this nupp-bpf's (as it writes
 * it), so that the seeds and the crash inputs, which carry the digest of the
 * table they were made with, still test the lines that follow after a change
 * of the table; the input as it is, naming another table, is never taken.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "luajit/build_cache.h"

static void fail(const char *what, int i)
{
	fprintf(stderr, "fuzz_build_cache: %s (%d)\n", what, i);
	abort();
}

static char table[65];		/* this nupp-bpf's revision-table digest */

/* The key an entry names, its first file-size and debug-file lines; and
 * where the digest of its first table line is, when it has 64 characters
 * (-1 when not). */
static long key_of(const char *data, size_t size, struct build_key *k)
{
	bool size_seen = false, dbg_seen = false, table_seen = false;
	const char *p = data, *end = data + size;
	long digest = -1;

	memset(k, 0, sizeof(*k));
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p), *eol = nl ? nl : end;
		size_t n = eol - p;
		char line[512];

		snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1), p);
		if (!size_seen && !strncmp(line, "file-size ", 10)) {
			unsigned long long v;

			size_seen = true;
			if (sscanf(line + 10, "%llu", &v) == 1)
				k->file_size = v;
		} else if (!dbg_seen && !strncmp(line, "debug-file ", 11)) {
			dbg_seen = true;
			if (strcmp(line + 11, "-"))
				snprintf(k->debug_file, sizeof(k->debug_file), "%s", line + 11);
		} else if (!table_seen && !strncmp(line, "table ", 6)) {
			table_seen = true;
			if (n == 6 + 64)
				digest = p + 6 - data;
		}
		p = eol + 1;
	}
	return digest;
}

/* The digest this nupp-bpf writes: an entry stored in a directory of our own. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char dir[] = "/tmp/fuzz_build_cache.XXXXXX", path[128], line[128];
	struct build_key k = { .file_size = 1 };
	struct lj_code_sites s = { 0 };
	FILE *f;

	if (!mkdtemp(dir) || setenv("NUPP_CACHE_DIR", dir, 1))
		fail("no directory for the cache", 0);
	build_cache__store_sites(&k, &s);
	snprintf(path, sizeof(path), "%s/%064d", dir, 0);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f) && sscanf(line, "table %64s", table) != 1)
		;
	if (f)
		fclose(f);
	unlink(path);
	rmdir(dir);
	if (strlen(table) != 64)
		fail("no table digest in an entry written", (int)strlen(table));
	return 0;
}

static int parse(const uint8_t *data, size_t size, const struct build_key *k,
		 struct lj_code_sites *s, struct lj_derived *d)
{
	FILE *f = size ? fmemopen((void *)data, size, "r") : NULL;
	int ret;

	if (!f)
		return -1;	/* an empty file: nothing to read */
	ret = build_cache__parse(f, k, s, d);
	fclose(f);
	return ret;
}

static bool is_string(const char *s, size_t n)
{
	const char *nul = memchr(s, '\0', n);

	return nul && !memchr(s, '\n', nul - s);
}

static void check_sites(const struct lj_code_sites *s)
{
	if (s->abort_nmore < 0 || s->abort_nmore > CODE_SITES_MAX_COPIES - 1)
		fail("abort_nmore out of abort_more", s->abort_nmore);
	if (!is_string(s->gc_why, sizeof(s->gc_why)) || !is_string(s->abort_why, sizeof(s->abort_why)))
		fail("a reason that is not one NUL-terminated line", 0);
}

static bool one_of(const char *s, const char *a, const char *b)
{
	return s && (!strcmp(s, a) || !strcmp(s, b));
}

static void check_derived(const struct lj_derived *d)
{
	check_sites(&d->sites);
	if (!one_of(d->fork, "luajit", "luajit2") || !one_of(d->sites_from, "symbols", "machine code"))
		fail("a fork or sites origin nupp-bpf does not name", 0);
	if (!is_string(d->version.text, sizeof(d->version.text)) || !is_string(d->options, sizeof(d->options)))
		fail("a version text or options that are not one NUL-terminated line", 0);
	if (d->ncands < 1 || d->ncands > LJ_DERIVE_MAX_CANDS)
		fail("a candidate count out of cands", d->ncands);
	for (int i = 0; i < d->ncands; i++) {
		const struct lj_candidate *c = &d->cands[i];
		const struct lj_revision *r = c->rev;
		bool known = c->layout == &d->dwarf;

		if (!one_of(c->from, "DWARF", "revision table"))
			fail("a candidate of unknown origin", i);
		if (r && (r < lj_revisions || r >= lj_revisions + lj_nrevisions))
			fail("a candidate's revision outside the table", i);
		known |= r && c->layout == r->layout;
		for (int v = 0; r && v < r->nvariants; v++)
			known |= c->layout == r->variants[v].layout;
		if (!known)
			fail("a candidate's layout neither the entry's DWARF nor its revision's", i);
	}
}

/* The checks, over the input as this nupp-bpf's table's entry. */
static void check(const uint8_t *data, size_t size, const struct build_key *k)
{
	struct build_key other;
	struct lj_code_sites s;
	struct lj_derived d;
	int ret = parse(data, size, k, &s, &d);

	if (ret == 0)
		check_sites(&s);
	else if (ret == 1)
		check_derived(&d);
	else if (ret != -1)
		fail("an answer that is not -1, 0 or 1", ret);
	if (ret < 0)
		return;
	/* Taken for its own build only. */
	other = *k;
	other.file_size++;
	if (parse(data, size, &other, &s, &d) != -1)
		fail("an entry taken for a file of another size", 0);
	other = *k;
	snprintf(other.debug_file, sizeof(other.debug_file), "%s", k->debug_file[0] ? "" : "/x.debug");
	if (parse(data, size, &other, &s, &d) != -1)
		fail("an entry taken for another debug file", 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct build_key k;
	struct lj_code_sites s;
	struct lj_derived d;
	long at = key_of((const char *)data, size, &k);
	uint8_t *ours;

	if (at < 0 || !memcmp(data + at, table, 64)) {
		check(data, size, &k);
		return 0;
	}
	if (parse(data, size, &k, &s, &d) != -1)
		fail("an entry of another revision table taken", 0);
	ours = malloc(size);
	if (!ours)
		return 0;
	memcpy(ours, data, size);
	memcpy(ours + at, table, 64);
	check(ours, size, &k);
	free(ours);
	return 0;
}
