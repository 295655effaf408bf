// SPDX-License-Identifier: MIT
/*
 * speedscope.c - a profile in speedscope's file format (speedscope.h).
 *
 * The shared frames are the profile's functions, then one frame per zone
 * path when --zones asks for them. Rows are sorted by thread, then by
 * stack, so that each profile's samples are contiguous and its "Time
 * Order" view groups like stacks (a sampled profile here has no time
 * order of its own: its counts are sums).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "base/text.h"
#include "base/keymap.h"
#include "speedscope.h"
#include "base/text.h"

#define SCHEMA	"https://www.speedscope.app/file-format-schema.json"

struct writer {
	const struct profile *p;
	const struct render_opts *o;
	FILE *out;
	__u32 *fn_of;			/* by frame: its shared frame */
	__u32 *first;			/* by function: the frame it was first seen as */
	long nfn;
	struct keymap zones;		/* zone path -> its shared frame */
	long nframes;			/* shared frames so far */
	const struct profile_row **rows;	/* kept rows, in file order */
	size_t nrows;
	const char *unit;		/* speedscope's: "none" (samples), "microseconds" */
};

static int thread_cmp(const struct profile_row *x, const struct profile_row *y)
{
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->g < y->g ? -1 : x->g > y->g;
}

/* By thread first when there is a profile per thread (by_thread). */
static int row_cmp(const void *a, const void *b, void *by_thread)
{
	const struct profile_row *x = *(const struct profile_row *const *)a;
	const struct profile_row *y = *(const struct profile_row *const *)b;
	int c = *(const bool *)by_thread ? thread_cmp(x, y) : 0;

	if (!c)
		c = strcmp(x->zone, y->zone);
	return c ? c : strcmp(x->stack, y->stack);
}

/* The kept rows, sorted: one run per profile. */
static int sort_rows(struct writer *w)
{
	const struct profile_row *r;

	w->rows = calloc(w->p->nrows + 1, sizeof(*w->rows));
	if (!w->rows)
		return -1;
	for (size_t i = 0; (r = profile__next_kept(w->p, w->o, &i));)
		w->rows[w->nrows++] = r;
	qsort_r(w->rows, w->nrows, sizeof(*w->rows), row_cmp, (void *)&w->o->threads);
	return 0;
}

static void put_frame(struct writer *w, const char *name, const char *file, __u32 line)
{
	fputs(w->nframes++ ? ",\n{\"name\":" : "\n{\"name\":", w->out);
	text__put_json(w->out, name);
	if (file[0]) {
		fputs(",\"file\":", w->out);
		text__put_json(w->out, file);
	}
	if (line)
		fprintf(w->out, ",\"line\":%u", line);
	fputc('}', w->out);
}

/* The shared frame of zone path z, written when new; -1 when out of memory. */
static long zone_frame(struct writer *w, const char *z)
{
	long at = keymap__get(&w->zones, z, strlen(z));
	struct strbuf name = { 0 };

	if (at >= 0)
		return at;
	/* Named as the collapsed stacks name it (profile.c): escaped alike. */
	if (strbuf__puts(&name, "[zone ") || strbuf__put_escaped(&name, z, strlen(z)) ||
	    strbuf__puts(&name, "]") || strbuf__put(&name, "", 1)) {
		strbuf__free(&name);
		return -1;
	}
	at = w->nframes;
	put_frame(w, name.buf, "", 0);
	strbuf__free(&name);
	return keymap__put(&w->zones, z, strlen(z), at) ? -1 : at;
}

/* shared.frames: the functions, then the zones. */
static int put_frames(struct writer *w)
{
	size_t n = w->p->nframes + 1;

	w->fn_of = malloc(n * sizeof(*w->fn_of));
	w->first = malloc(n * sizeof(*w->first));
	if (!w->fn_of || !w->first || (w->nfn = profile__functions(w->p, w->fn_of, w->first)) < 0)
		return -1;
	fputs("\"shared\":{\"frames\":[", w->out);
	for (long k = 0; k < w->nfn; k++) {
		const struct profile_frame *f = &w->p->frames[w->first[k]];

		put_frame(w, f->name, f->file, f->start_line);
	}
	for (size_t i = 0; w->o->zones && i < w->nrows; i++)
		if (w->rows[i]->zone[0] && zone_frame(w, w->rows[i]->zone) < 0)
			return -1;
	fputs("]},\n", w->out);
	return 0;
}

/* One sample: the row's stack as shared frames, outermost first. */
static void put_stack(struct writer *w, const struct profile_row *r)
{
	__u32 first = profile_row__first_frame(w->p, r, w->o->root);
	const char *sep = "";

	fputc('[', w->out);
	if (w->o->zones && r->zone[0]) {
		fprintf(w->out, "%ld", keymap__get(&w->zones, r->zone, strlen(r->zone)));
		sep = ",";
	}
	for (__u32 k = first; k < r->nframes; k++, sep = ",")
		fprintf(w->out, "%s%u", sep, w->fn_of[r->frames[k]]);
	fputc(']', w->out);
}

static void put_profile_name(struct writer *w, const struct profile_row *r)
{
	char name[96];

	if (w->o->threads && r) {
		snprintf(name, sizeof(name), "%u/%u vm 0x%llx", r->pid, r->tid,
			 (unsigned long long)r->g);
		text__put_json(w->out, name);
	} else {
		text__put_json(w->out, w->p->title ? w->p->title : "nupp-bpf");
	}
}

/* A sampled profile of rows[from..to); its samples, then their weights. */
static void put_profile(struct writer *w, size_t from, size_t to)
{
	__u64 total = 0;

	for (size_t i = from; i < to; i++)
		total += profile_row__count(w->rows[i]);
	fputs(from ? ",\n{\"type\":\"sampled\",\"name\":" : "\n{\"type\":\"sampled\",\"name\":",
	      w->out);
	put_profile_name(w, from < to ? w->rows[from] : NULL);
	fprintf(w->out, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%llu,\n\"samples\":[",
		w->unit, (unsigned long long)total);
	for (size_t i = from; i < to; i++) {
		fputs(i > from ? ",\n" : "\n", w->out);
		put_stack(w, w->rows[i]);
	}
	fputs("],\n\"weights\":[", w->out);
	for (size_t i = from; i < to; i++)
		fprintf(w->out, "%s%llu", i > from ? "," : "",
			(unsigned long long)profile_row__count(w->rows[i]));
	fputs("]}", w->out);
}

/* The profiles: one per thread and VM with --threads, else one (an empty
 * one when nothing was sampled: speedscope shows a file with none as an
 * error). */
static void put_profiles(struct writer *w)
{
	size_t from = 0;

	fputs("\"profiles\":[", w->out);
	if (!w->nrows)
		put_profile(w, 0, 0);
	for (size_t i = 1; i <= w->nrows; i++)
		if (i == w->nrows || (w->o->threads && thread_cmp(w->rows[i - 1], w->rows[i]))) {
			put_profile(w, from, i);
			from = i;
		}
	fputs("]}\n", w->out);
}

int speedscope__write(const struct profile *p, const struct render_opts *o, FILE *out)
{
	struct writer w = { .p = p, .o = o, .out = out,
			    .unit = p->measure == PROFILE_SAMPLES ? "none" :
				    profile__is_heap(p) || p->measure == PROFILE_ALLOC ?
				    "bytes" : "microseconds" };
	int ret = -1;

	if (sort_rows(&w))
		goto out;
	fputs("{\"$schema\":\"" SCHEMA "\",\n\"exporter\":\"nupp-bpf\",\"name\":", out);
	text__put_json(out, p->title ? p->title : "nupp-bpf");
	fputs(",\"activeProfileIndex\":0,\n", out);
	if (put_frames(&w))
		goto out;
	put_profiles(&w);
	ret = ferror(out) ? -1 : 0;
out:
	free(w.fn_of);
	free(w.first);
	free(w.rows);
	keymap__free(&w.zones);
	return ret;
}
