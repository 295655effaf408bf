// SPDX-License-Identifier: MIT
/* profile.c - aggregated samples and their collapsed-stack rendering. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "keymap.h"
#include "profile.h"

long profile__add(struct profile *p, __u32 pid, __u32 tid, __u64 g, const char *zone,
		  const char *stack)
{
	struct profile_row *r;

	if (p->nrows == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		struct profile_row *rows = realloc(p->rows, cap * sizeof(*rows));

		if (!rows)
			return -1;
		p->rows = rows;
		p->cap = cap;
	}
	r = &p->rows[p->nrows];
	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->tid = tid;
	r->g = g;
	r->zone = strdup(zone);
	r->stack = strdup(stack);
	if (!r->zone || !r->stack) {
		free(r->zone);
		free(r->stack);
		return -1;
	}
	return p->nrows++;
}

void profile__free(struct profile *p)
{
	for (size_t i = 0; i < p->nrows; i++) {
		free(p->rows[i].zone);
		free(p->rows[i].stack);
	}
	free(p->rows);
	memset(p, 0, sizeof(*p));
}

__u64 profile_row__count(const struct profile_row *r)
{
	__u64 n = 0;

	for (int i = 0; i < NUPP_ST_MAX; i++)
		n += r->state[i];
	return n;
}

bool zone__under(const char *zone, const char *prefix)
{
	size_t n = strlen(prefix);

	if (!n)
		return true;
	if (prefix[n - 1] == '/')
		n--;
	return !strncmp(zone, prefix, n) && (zone[n] == '\0' || zone[n] == '/');
}

const char *stack__cut_root(const char *stack, const char *root)
{
	size_t n = root ? strlen(root) : 0;
	const char *f = stack;

	if (!n)
		return stack;
	for (;;) {
		if (!strncmp(f, root, n) && f[n] == ':')
			return f;
		f = strchr(f, ';');
		if (!f)
			return stack;
		f++;
	}
}

static bool row_kept(const struct profile_row *r, const struct render_opts *o)
{
	return (!o->zone || zone__under(r->zone, o->zone)) && profile_row__count(r);
}

void profile__totals(const struct profile *p, const struct render_opts *o,
		     __u64 state[NUPP_ST_MAX])
{
	memset(state, 0, NUPP_ST_MAX * sizeof(*state));
	for (size_t i = 0; i < p->nrows; i++)
		if (row_kept(&p->rows[i], o))
			for (int s = 0; s < NUPP_ST_MAX; s++)
				state[s] += p->rows[i].state[s];
}

struct line {
	char *text;
	__u64 count;
};

static int line_cmp(const void *a, const void *b)
{
	const struct line *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return strcmp(x->text, y->text);
}

/* The text a row renders to, before its count; malloc'ed. */
static char *row_text(const struct profile_row *r, const struct render_opts *o)
{
	const char *stack = stack__cut_root(r->stack, o->root);
	char *text = NULL, thread[96] = "", zone[16 + 4096] = "";

	if (o->threads)
		snprintf(thread, sizeof(thread), "[%u/%u vm 0x%llx];", r->pid, r->tid,
			 (unsigned long long)r->g);
	if (o->zones && r->zone[0])
		snprintf(zone, sizeof(zone), "[zone %s];", r->zone);
	return asprintf(&text, "%s%s%s", thread, zone, stack) < 0 ? NULL : text;
}

long profile__write_collapsed(const struct profile *p, const struct render_opts *o,
			      FILE *out, __u64 *samples)
{
	struct keymap index = {};
	struct line *lines = calloc(p->nrows + 1, sizeof(*lines));
	long n = 0, ret = -1;
	__u64 total = 0;

	if (!lines)
		return -1;
	for (size_t i = 0; i < p->nrows; i++) {
		const struct profile_row *r = &p->rows[i];
		char *text;
		long at;

		if (!row_kept(r, o))
			continue;
		text = row_text(r, o);
		if (!text)
			goto out;
		at = keymap__get(&index, text, strlen(text));
		if (at < 0) {
			if (keymap__put(&index, text, strlen(text), n)) {
				free(text);
				goto out;
			}
			lines[n].text = text;
			at = n++;
		} else {
			free(text);
		}
		lines[at].count += profile_row__count(r);
		total += profile_row__count(r);
	}
	qsort(lines, n, sizeof(*lines), line_cmp);
	for (long i = 0; i < n; i++)
		if (fprintf(out, "%s %llu\n", lines[i].text, (unsigned long long)lines[i].count) < 0)
			goto out;
	if (samples)
		*samples = total;
	ret = n;
out:
	for (long i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
	keymap__free(&index);
	return ret;
}
