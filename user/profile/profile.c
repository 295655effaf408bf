// SPDX-License-Identifier: MIT
/*
 * profile.c - the aggregated profile and its collapsed-stack rendering
 * (profile.h).
 *
 * Frames are kept once per profile, keyed by all their fields, and grouped
 * into functions (name, file, first line) for the formats that want them;
 * a row holds its frames' indexes, its text and its counts by VM state.
 * Rendering keeps the rows under --zone, adds thread and zone frames where
 * asked, cuts stacks back to --root, merges rows of one text by sorting
 * them, and orders the lines by count.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "base/keymap.h"
#include "profile.h"
#include "base/text.h"
#include "base/util.h"

const char *const profile_state_names[NUPP_ST_MAX] = {
	"compiled", "interpreted", "C", "GC", "compiling",
};

/* The numbers of a frame, first in its key. */
struct frame_nums {
	__u64 addr, map_start, map_limit, map_off;
	__u32 start_line, line, kind;
	__u32 zero;		/* no padding: every byte of a key is set */
};

/* A frame's fields as one byte string: its numbers, its name, a NUL, its
 * file. In buf when it fits (a new stack looks up every frame of it: no
 * malloc for the many that are known), else malloc'ed; its length in
 * *len; NULL when out of memory. */
static char *frame_key(const struct profile_frame *f, char *buf, size_t bufsz, size_t *len)
{
	struct frame_nums nums = {
		f->addr, f->map_start, f->map_limit, f->map_off, f->start_line, f->line, f->kind, 0,
	};
	size_t nlen = strlen(f->name), flen = strlen(f->file);
	size_t n = sizeof(nums) + nlen + 1 + flen;
	char *key = n <= bufsz ? buf : malloc(n);

	if (!key)
		return NULL;
	memcpy(key, &nums, sizeof(nums));
	memcpy(key + sizeof(nums), f->name, nlen + 1);
	memcpy(key + sizeof(nums) + nlen + 1, f->file, flen);
	*len = n;
	return key;
}

/* Append a copy of f to p's frames; its index, or -1. */
static long frame_append(struct profile *p, const struct profile_frame *f)
{
	struct profile_frame *c;

	if (ARRAY_ROOM(p->frames, p->nframes, p->frames_cap, 256))
		return -1;
	c = &p->frames[p->nframes];
	*c = *f;
	c->name = strdup(f->name);
	c->file = strdup(f->file);
	if (!c->name || !c->file) {
		free(c->name);
		free(c->file);
		return -1;
	}
	return p->nframes++;
}

long profile__frame(struct profile *p, const struct profile_frame *f)
{
	char buf[512];
	size_t len;
	char *key = frame_key(f, buf, sizeof(buf), &len);
	long at;

	if (!key)
		return -1;
	at = keymap__get(&p->frame_index, key, len);
	if (at < 0) {
		at = frame_append(p, f);
		if (at >= 0 && keymap__put(&p->frame_index, key, len, at)) {
			free(p->frames[at].name);
			free(p->frames[at].file);
			p->nframes--;
			at = -1;
		}
	}
	if (key != buf)
		free(key);
	return at;
}

/* A function's identity: its name, file and first line, as one byte string. */
static char *function_key(const struct profile_frame *f, size_t *len)
{
	char *key = NULL;
	int n = asprintf(&key, "%s%c%s%c%u", f->name, 0, f->file, 0, f->start_line);

	*len = n < 0 ? 0 : (size_t)n;
	return n < 0 ? NULL : key;
}

long profile__functions(const struct profile *p, __u32 *fn, __u32 *first)
{
	struct keymap index = {};
	long n = 0;

	for (size_t i = 0; i < p->nframes; i++) {
		size_t len;
		char *key = function_key(&p->frames[i], &len);
		long at = key ? keymap__get(&index, key, len) : -1;

		if (key && at < 0 && !keymap__put(&index, key, len, n)) {
			if (first)
				first[n] = i;
			at = n++;
		}
		free(key);
		if (at < 0) {
			n = -1;
			break;
		}
		fn[i] = at;
	}
	keymap__free(&index);
	return n;
}

/* The names of frames[0..n) joined by ';'; malloc'ed, NULL when out of memory. */
static char *stack_join(const struct profile *p, const __u32 *frames, __u32 n)
{
	size_t len = 1, at = 0;
	char *stack;

	for (__u32 i = 0; i < n; i++)
		len += strlen(p->frames[frames[i]].name) + 1;
	stack = malloc(len);
	if (!stack)
		return NULL;
	stack[0] = '\0';
	for (__u32 i = 0; i < n; i++) {
		size_t k = strlen(p->frames[frames[i]].name);

		if (i)
			stack[at++] = ';';
		memcpy(stack + at, p->frames[frames[i]].name, k + 1);
		at += k;
	}
	return stack;
}

/* Room for one more row; 0 or -1. */
static int rows_reserve(struct profile *p)
{
	return ARRAY_ROOM(p->rows, p->nrows, p->cap, 256);
}

static void row_free(struct profile_row *r)
{
	free(r->zone);
	free(r->stack);
	free(r->frames);
}

long profile__add(struct profile *p, __u32 pid, __u32 tid, __u64 g, const char *zone,
		  const __u32 *frames, __u32 n)
{
	struct profile_row *r;

	if (rows_reserve(p))
		return -1;
	r = &p->rows[p->nrows];
	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->tid = tid;
	r->g = g;
	r->nframes = n;
	r->zone = strdup(zone);
	r->stack = stack_join(p, frames, n);
	r->frames = malloc((n ? n : 1) * sizeof(*frames));
	if (!r->zone || !r->stack || !r->frames) {
		row_free(r);
		return -1;
	}
	memcpy(r->frames, frames, n * sizeof(*frames));
	return p->nrows++;
}

void profile__free(struct profile *p)
{
	for (size_t i = 0; i < p->nrows; i++)
		row_free(&p->rows[i]);
	for (size_t i = 0; i < p->nframes; i++) {
		free(p->frames[i].name);
		free(p->frames[i].file);
	}
	free(p->rows);
	free(p->frames);
	free(p->title);
	free(p->cost);
	keymap__free(&p->frame_index);
	memset(p, 0, sizeof(*p));
}

/* *field replaced by a copy of text; 0, or -1 out of memory (as it was). */
static int replace_string(char **field, const char *text)
{
	char *t = strdup(text);

	if (!t)
		return -1;
	free(*field);
	*field = t;
	return 0;
}

int profile__set_title(struct profile *p, const char *title)
{
	return replace_string(&p->title, title);
}

int profile__set_cost(struct profile *p, const char *cost)
{
	return replace_string(&p->cost, cost);
}

bool profile__is_heap(const struct profile *p)
{
	return p->measure == PROFILE_HEAP || p->measure == PROFILE_HEAP_GROWTH;
}

const char *profile__unit(const struct profile *p)
{
	return p->measure == PROFILE_OFF_CPU ? "µs off-CPU" : p->measure == PROFILE_WALL ? "µs" :
	       profile__is_heap(p) || p->measure == PROFILE_ALLOC ? "bytes" : "samples";
}

int profile__add_scaled(struct profile *dst, const struct profile *src, __u64 num, __u64 den)
{
	long *id = malloc((src->nframes + 1) * sizeof(*id));	/* in src -> in dst */
	__u32 *ids, most = 1;
	int ret = -1;

	for (size_t i = 0; i < src->nrows; i++)
		if (src->rows[i].nframes > most)
			most = src->rows[i].nframes;
	ids = malloc(most * sizeof(*ids));
	if (!id || !ids || !den)
		goto out;
	for (size_t i = 0; i < src->nframes; i++)
		if ((id[i] = profile__frame(dst, &src->frames[i])) < 0)
			goto out;
	for (size_t i = 0; i < src->nrows; i++) {
		const struct profile_row *r = &src->rows[i];
		long at;

		for (__u32 k = 0; k < r->nframes; k++)
			ids[k] = id[r->frames[k]];
		if ((at = profile__add(dst, r->pid, r->tid, r->g, r->zone, ids, r->nframes)) < 0)
			goto out;
		for (int s = 0; s < NUPP_ST_MAX; s++)
			dst->rows[at].state[s] = (r->state[s] * num + den / 2) / den;
		dst->rows[at].unreadable = r->unreadable;
		dst->rows[at].off_cpu = r->off_cpu;
		dst->rows[at].alloc = (struct profile_alloc){
			(r->alloc.objects * num + den / 2) / den,
			(r->alloc.inuse_objects * num + den / 2) / den,
			(r->alloc.inuse_bytes * num + den / 2) / den,
		};
	}
	ret = 0;
out:
	free(id);
	free(ids);
	return ret;
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

/* Whether frame name is from module root: "root:…". */
static bool from_module(const char *name, const char *root, size_t n)
{
	return !strncmp(name, root, n) && name[n] == ':';
}

const char *stack__cut_root(const char *stack, const char *root)
{
	size_t n = root ? strlen(root) : 0;
	const char *f = stack;

	/* Frame names have their ';' escaped: a root with one names no
	 * frame's module, and matched in the text it would span frames. */
	if (!n || strchr(root, ';'))
		return stack;
	for (;;) {
		if (from_module(f, root, n))
			return f;
		f = strchr(f, ';');
		if (!f)
			return stack;
		f++;
	}
}

__u32 profile_row__first_frame(const struct profile *p, const struct profile_row *r,
			       const char *root)
{
	size_t n = root ? strlen(root) : 0;

	for (__u32 i = 0; n && i < r->nframes; i++)
		if (from_module(p->frames[r->frames[i]].name, root, n))
			return i;
	return 0;
}

bool profile_row__kept(const struct profile_row *r, const struct render_opts *o)
{
	return (!o->zone || zone__under(r->zone, o->zone)) && profile_row__count(r);
}

const struct profile_row *profile__next_kept(const struct profile *p, const struct render_opts *o,
					     size_t *i)
{
	while (*i < p->nrows) {
		const struct profile_row *r = &p->rows[(*i)++];

		if (profile_row__kept(r, o))
			return r;
	}
	return NULL;
}

void profile__totals(const struct profile *p, const struct render_opts *o,
		     __u64 state[NUPP_ST_MAX])
{
	const struct profile_row *r;

	memset(state, 0, NUPP_ST_MAX * sizeof(*state));
	for (size_t i = 0; (r = profile__next_kept(p, o, &i));)
		for (int s = 0; s < NUPP_ST_MAX; s++)
			state[s] += r->state[s];
}

static int line_cmp(const void *a, const void *b)
{
	const struct collapsed_line *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

const char *profile_row__text(const struct profile_row *r, const struct render_opts *o,
			      char **owned)
{
	const char *stack = stack__cut_root(r->stack, o->root);
	struct strbuf zone = { 0 };
	char thread[96] = "";
	int err = 0;

	*owned = NULL;
	if (!o->threads && !(o->zones && r->zone[0]))
		return stack;		/* the row's own text: most rows, no copy */
	if (o->threads)
		snprintf(thread, sizeof(thread), "[%u/%u vm 0x%llx];", r->pid, r->tid,
			 (unsigned long long)r->g);
	/* A zone path is the target's own string: escaped as frame names are,
	 * or a ';' or a newline in it would split the line. */
	if (o->zones && r->zone[0])
		err = strbuf__puts(&zone, "[zone ") || strbuf__put_escaped(&zone, r->zone, strlen(r->zone)) ||
		      strbuf__puts(&zone, "];");
	if (!err && asprintf(owned, "%s%s%s", thread, zone.buf ? zone.buf : "", stack) < 0)
		*owned = NULL;
	strbuf__free(&zone);
	return *owned;
}

void collapsed__free(struct collapsed *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->lines[i].owned);
	free(c->lines);
	*c = (struct collapsed){ 0 };
}

static int text_cmp(const void *a, const void *b)
{
	return strcmp(((const struct collapsed_line *)a)->text, ((const struct collapsed_line *)b)->text);
}

int profile__collapse(const struct profile *p, const struct render_opts *o, struct collapsed *c)
{
	const struct profile_row *r;
	size_t n = 0;

	*c = (struct collapsed){ .lines = calloc(p->nrows + 1, sizeof(*c->lines)) };
	if (!c->lines)
		return -1;
	for (size_t i = 0; (r = profile__next_kept(p, o, &i)); n++) {
		struct collapsed_line *l = &c->lines[n];

		if (!(l->text = profile_row__text(r, o, &l->owned))) {
			c->n = n;
			collapsed__free(c);
			return -1;
		}
		l->count = profile_row__count(r);
		c->samples += l->count;
	}
	/* Rows of one text side by side, merged; then by count, ties in the
	 * text order just made (rank): no hash of every text, no string
	 * compared twice. */
	qsort(c->lines, n, sizeof(*c->lines), text_cmp);
	for (size_t i = 0; i < n; i++) {
		struct collapsed_line *l = &c->lines[i];

		if (c->n && !strcmp(c->lines[c->n - 1].text, l->text)) {
			c->lines[c->n - 1].count += l->count;
			free(l->owned);
			continue;
		}
		c->lines[c->n] = *l;
		c->lines[c->n].rank = c->n;
		c->n++;
	}
	qsort(c->lines, c->n, sizeof(*c->lines), line_cmp);
	return 0;
}

long profile__write_collapsed(const struct profile *p, const struct render_opts *o,
			      FILE *out, __u64 *samples)
{
	struct collapsed c;
	long ret = -1;

	if (profile__collapse(p, o, &c))
		return -1;
	for (size_t i = 0; i < c.n; i++) {
		char count[24], *end = count + sizeof(count), *at;

		*--end = '\n';
		at = u64_digits(end, c.lines[i].count);
		*--at = ' ';
		if (fputs(c.lines[i].text, out) == EOF ||
		    fwrite(at, 1, count + sizeof(count) - at, out) != (size_t)(count + sizeof(count) - at))
			goto out;
	}
	if (samples)
		*samples = c.samples;
	ret = c.n;
out:
	collapsed__free(&c);
	return ret;
}
