// SPDX-License-Identifier: MIT
/*
 * build_cache.c - one small text file per build, named by its .text digest.
 *
 *	nupp-bpf build cache 1
 *	table <digest of nupp-bpf's revision table>
 *	file-size <bytes>
 *	debug-file <path, or ->
 *	sites <struct lj_code_sites, hex>
 *	derived <fork> <sites-from>		(a derived build only, then:)
 *	version <minor> <rolling> <text>
 *	options <text, may be empty>
 *	flags <has_jit> <has_dwarf> <dwarf_in_table>
 *	dwarf <struct lj_layout, hex>
 *	cand <revision index> <layout: base | variant N | dwarf> <from>
 *
 * Revisions are named by their index in the table the digest covers, so a
 * nupp-bpf with another table reads no entry of this one. Structs are kept
 * as their bytes with their sizes in the digest: a layout change in
 * nupp-bpf changes the digest too. Files are written whole, then renamed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sha2.h>
#include "build_cache.h"

#define MAGIC "nupp-bpf build cache 1"

/* The directory, created if need be; NULL when there is none fit to use. */
static const char *cache_dir(void)
{
	static char dir[4096];
	static int state;	/* 0 unknown, 1 usable, -1 not */
	const char *env = getenv("NUPP_CACHE_DIR"), *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
	struct stat st;

	if (state)
		return state > 0 ? dir : NULL;
	state = -1;
	if (env && env[0])
		snprintf(dir, sizeof(dir), "%s", env);
	else if (geteuid() == 0)
		snprintf(dir, sizeof(dir), "/var/cache/nupp-bpf");
	else if (xdg && xdg[0])
		snprintf(dir, sizeof(dir), "%s/nupp-bpf", xdg);
	else if (home && home[0])
		snprintf(dir, sizeof(dir), "%s/.cache/nupp-bpf", home);
	else
		return NULL;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return NULL;
	/* Entries steer where probes go: only a directory no one else can write. */
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return NULL;
	state = 1;
	return dir;
}

static void hex(char *out, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

static bool unhex(const char *s, void *p, size_t n)
{
	unsigned char *o = p;

	if (strspn(s, "0123456789abcdef") != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++)
		sscanf(s + 2 * i, "%2hhx", &o[i]);
	return true;
}

/* What an entry's revision references and struct bytes mean: the revision
 * table this nupp-bpf carries (its digest made when it was generated), and
 * the sizes of the structs. */
static const char *table_digest(void)
{
	static char out[2 * 32 + 1];
	SHA2_CTX c;
	unsigned char md[SHA256_DIGEST_LENGTH];
	size_t sizes[] = { sizeof(struct lj_layout), sizeof(struct lj_code_sites),
			   sizeof(struct lj_version) };

	if (out[0])
		return out;
	SHA256Init(&c);
	SHA256Update(&c, (const void *)sizes, sizeof(sizes));
	SHA256Update(&c, (const void *)lj_revisions_digest, strlen(lj_revisions_digest));
	SHA256Final(md, &c);
	hex(out, md, sizeof(md));
	return out;
}

int build_cache__key(struct elf_file *ef, const char *path, const char *root, struct build_key *k)
{
	char dbg[4096];
	struct stat st;

	memset(k, 0, sizeof(*k));
	if (stat(path, &st) || elf_file__text_sha256(ef, k->text_sha256))
		return -1;
	/* The debug file as the target sees it: the same for every process. */
	if (lj_derive__debug_file(ef, root, dbg, sizeof(dbg)))
		snprintf(k->debug_file, sizeof(k->debug_file), "%s", dbg + strlen(root));
	k->file_size = st.st_size;
	return 0;
}

static void entry_path(const struct build_key *k, char *out, size_t outsz)
{
	char name[2 * 32 + 1];

	hex(name, k->text_sha256, 32);
	snprintf(out, outsz, "%s/%s", cache_dir(), name);
}

/* --- reading ------------------------------------------------------------- */

struct entry {
	struct lj_code_sites sites;
	bool derived;
	struct lj_derived d;
};

static const char *const forks[] = { "luajit", "luajit2", NULL };
static const char *const sites_froms[] = { "symbols", "machine-code", NULL };
static const char *const sites_shown[] = { "symbols", "machine code", NULL };
static const char *const froms[] = { "DWARF", "revision-table", NULL };
static const char *const froms_shown[] = { "DWARF", "revision table", NULL };

static int word_index(const char *const *words, const char *w)
{
	for (int i = 0; words[i]; i++)
		if (!strcmp(words[i], w))
			return i;
	return -1;
}

static int index_of_shown(const char *const *words, const char *w)
{
	return w ? word_index(words, w) : -1;
}

/* A struct lj_code_sites read back as bytes holds what its users index and
 * print without a check: abort_more's count, the reasons as one line each. */
static bool sites_ok(const struct lj_code_sites *s)
{
	return s->abort_nmore >= 0 && s->abort_nmore < CODE_SITES_MAX_COPIES &&
	       memchr(s->gc_why, '\0', sizeof(s->gc_why)) && !strchr(s->gc_why, '\n') &&
	       memchr(s->abort_why, '\0', sizeof(s->abort_why)) && !strchr(s->abort_why, '\n');
}

/* One "cand" line into d->cands[d->ncands]. */
static bool read_cand(const char *rest, struct lj_derived *d)
{
	char kind[16] = "", from[32];	/* kind: not read by "variant N" lines */
	int rev, var = -1, n = 0;
	struct lj_candidate *c = &d->cands[d->ncands];
	const struct lj_revision *r;

	if (d->ncands >= LJ_DERIVE_MAX_CANDS ||
	    (sscanf(rest, "%d variant %d %31s", &rev, &var, from) != 3 &&
	     sscanf(rest, "%d %15s %31s%n", &rev, kind, from, &n) != 3))
		return false;
	if (rev < -1 || rev >= lj_nrevisions || (n = word_index(froms, from)) < 0)
		return false;
	r = rev >= 0 ? &lj_revisions[rev] : NULL;
	c->rev = r;
	c->from = froms_shown[n];
	if (var >= 0)
		c->layout = r && var < r->nvariants ? r->variants[var].layout : NULL;
	else if (!strcmp(kind, "dwarf"))
		c->layout = &d->dwarf;	/* the caller's copy: fixed up by the caller */
	else
		c->layout = r && !strcmp(kind, "base") ? r->layout : NULL;
	d->ncands += c->layout != NULL;
	return c->layout != NULL;
}

static bool read_line(struct entry *e, const struct build_key *k, char *line, int *seen)
{
	char *rest = strchr(line, ' '), w1[32], w2[32];
	struct lj_derived *d = &e->d;
	unsigned long long size;
	int a, b, c;

	if (!rest)
		return false;
	*rest++ = '\0';
	rest[strcspn(rest, "\n")] = '\0';
	if (!strcmp(line, "table"))
		return (*seen |= 1, !strcmp(rest, table_digest()));
	if (!strcmp(line, "file-size"))
		return (*seen |= 2, sscanf(rest, "%llu", &size) == 1 && size == k->file_size);
	if (!strcmp(line, "debug-file"))
		return (*seen |= 4, !strcmp(rest, k->debug_file[0] ? k->debug_file : "-"));
	if (!strcmp(line, "sites"))
		return (*seen |= 8, unhex(rest, &e->sites, sizeof(e->sites)) && sites_ok(&e->sites));
	if (!strcmp(line, "derived")) {
		if (sscanf(rest, "%31s %31s", w1, w2) != 2 || (a = word_index(forks, w1)) < 0 ||
		    (b = word_index(sites_froms, w2)) < 0)
			return false;
		e->derived = true;
		d->fork = forks[a];
		d->sites_from = sites_shown[b];
		return true;
	}
	if (!strcmp(line, "version")) {
		if (sscanf(rest, "%d %llu %n", &a, &size, &c) != 2)
			return false;
		d->version.minor = a;
		d->version.rolling = size;
		snprintf(d->version.text, sizeof(d->version.text), "%s", rest + c);
		return true;
	}
	if (!strcmp(line, "options"))
		return snprintf(d->options, sizeof(d->options), "%s", rest) < (int)sizeof(d->options);
	if (!strcmp(line, "flags")) {
		if (sscanf(rest, "%d %d %d", &a, &b, &c) != 3)
			return false;
		d->has_jit = a, d->has_dwarf = b, d->dwarf_in_table = c;
		return true;
	}
	if (!strcmp(line, "dwarf"))
		return unhex(rest, &d->dwarf, sizeof(d->dwarf));
	if (!strcmp(line, "cand"))
		return read_cand(rest, d);
	return false;
}

/* An entry's text, read from f line by line. */
static bool parse(FILE *f, const struct build_key *k, struct entry *e)
{
	char line[4096];
	int seen = 0;
	bool ok;

	memset(e, 0, sizeof(*e));
	ok = fgets(line, sizeof(line), f) && !strcmp(line, MAGIC "\n");
	while (ok && fgets(line, sizeof(line), f))
		ok = read_line(e, k, line, &seen);
	return ok && seen == 15 && (!e->derived || e->d.ncands > 0);
}

int build_cache__parse(FILE *f, const struct build_key *k, struct lj_code_sites *s, struct lj_derived *d)
{
	struct entry e;

	if (!parse(f, k, &e))
		return -1;
	if (!e.derived) {
		*s = e.sites;
		return 0;
	}
	*d = e.d;
	for (int i = 0; i < d->ncands; i++)
		if (d->cands[i].layout == &e.d.dwarf)
			d->cands[i].layout = &d->dwarf;
	d->sites = e.sites;
	return 1;
}

/* The cache's entry for k, parsed: as build_cache__parse, -1 when none. */
static int load(const struct build_key *k, struct lj_code_sites *s, struct lj_derived *d)
{
	char path[4200];
	int fd, ret;
	FILE *f;

	if (!cache_dir())
		return -1;
	entry_path(k, path, sizeof(path));
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(f = fdopen(fd, "r"))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	ret = build_cache__parse(f, k, s, d);
	fclose(f);
	return ret;
}

bool build_cache__load_sites(const struct build_key *k, struct lj_code_sites *s)
{
	struct lj_derived d;

	return load(k, s, &d) == 0;
}

bool build_cache__load_derived(const struct build_key *k, struct lj_derived *d)
{
	struct lj_code_sites s;

	return load(k, &s, d) == 1;
}

/* --- writing ------------------------------------------------------------- */

static void write_cand(FILE *f, const struct lj_derived *d, const struct lj_candidate *c)
{
	int rev = c->rev ? (int)(c->rev - lj_revisions) : -1, i = index_of_shown(froms_shown, c->from);
	const char *from = froms[i < 0 ? 0 : i];

	if (c->layout == &d->dwarf) {
		fprintf(f, "cand %d dwarf %s\n", rev, from);
		return;
	}
	if (c->rev && c->layout == c->rev->layout) {
		fprintf(f, "cand %d base %s\n", rev, from);
		return;
	}
	for (int v = 0; c->rev && v < c->rev->nvariants; v++)
		if (c->layout == c->rev->variants[v].layout)
			fprintf(f, "cand %d variant %d %s\n", rev, v, from);
}

static void store(const struct build_key *k, const struct lj_code_sites *s, const struct lj_derived *d)
{
	char path[4200], tmp[4300], buf[2 * sizeof(struct lj_layout) + 2 * sizeof(*s) + 1];
	int fd, sf = d ? index_of_shown(sites_shown, d->sites_from) : 0;
	FILE *f;

	if (!cache_dir() || sf < 0)
		return;
	entry_path(k, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	hex(buf, s, sizeof(*s));
	fprintf(f, MAGIC "\ntable %s\nfile-size %llu\ndebug-file %s\nsites %s\n", table_digest(),
		(unsigned long long)k->file_size, k->debug_file[0] ? k->debug_file : "-", buf);
	if (d) {
		fprintf(f, "derived %s %s\n", d->fork, sites_froms[sf]);
		fprintf(f, "version %d %llu %s\n", d->version.minor,
			(unsigned long long)d->version.rolling, d->version.text);
		fprintf(f, "options %s\nflags %d %d %d\n", d->options, d->has_jit, d->has_dwarf,
			d->dwarf_in_table);
		hex(buf, &d->dwarf, sizeof(d->dwarf));
		fprintf(f, "dwarf %s\n", buf);
		for (int i = 0; i < d->ncands; i++)
			write_cand(f, d, &d->cands[i]);
	}
	if (fclose(f) || rename(tmp, path))
		unlink(tmp);
}

void build_cache__store_sites(const struct build_key *k, const struct lj_code_sites *s)
{
	store(k, s, NULL);
}

void build_cache__store_derived(const struct build_key *k, const struct lj_derived *d)
{
	store(k, &d->sites, d);
}

void build_cache__drop(const struct build_key *k)
{
	char path[4200];

	if (!cache_dir())
		return;
	entry_path(k, path, sizeof(path));
	unlink(path);
}
