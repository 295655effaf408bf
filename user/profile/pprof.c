// SPDX-License-Identifier: MIT
/*
 * pprof.c - a profile in pprof's format (pprof.h).
 *
 * The message is built in memory with the C that protoc-c generated from
 * proto/profile.proto, packed by protobuf-c, and gzip'd by zlib as pprof
 * requires. Its strings are made valid UTF-8, as protobuf's must be (a
 * chunk name can hold any byte): a byte that is not is U+FFFD. Every table is allocated at its final size up front: the
 * profile says how many frames, functions and samples there are.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "base/text.h"
#include "base/keymap.h"
#include "pprof.h"
#include "profile.pb-c.h"
#include "base/util.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

#define MAX_LABELS	6	/* vmstate, cpu, zone, pid, tid, vm */

#define VALUES		4	/* a sample's values, at most */

/* The message under construction, and the storage its pointers point into. */
struct builder {
	pb_profile msg;
	struct keymap strings;		/* string -> index in msg.string_table */
	size_t strings_cap;
	pb_value_type types[4], *type_ptrs[4], period_type;
	__u32 *fn_of;			/* by frame: its function */
	__u32 *first;			/* by function: the frame it was first seen as */
	pb_function *fns, **fn_ptrs;
	struct keymap map_index;	/* a mapping's fields -> its index */
	pb_mapping *maps, **map_ptrs;
	pb_location *locs, **loc_ptrs;
	pb_line *lines, **line_ptrs;
	pb_sample *samples, **sample_ptrs;
	pb_label *labels, **label_ptrs;
	uint64_t *loc_ids;
	int64_t *values;
	int64_t comments[2];		/* the title, what recording it cost */
};

/* The index of s in the string table, added when new; -1 when out of memory. */
static long str(struct builder *b, const char *s)
{
	pb_profile *m = &b->msg;
	long at = keymap__get(&b->strings, s, strlen(s));
	char *copy;

	if (at >= 0)
		return at;
	if (ARRAY_ROOM(m->string_table, m->n_string_table, b->strings_cap, 256))
		return -1;
	copy = text__utf8_dup(s);	/* protobuf strings are UTF-8 */
	if (!copy || keymap__put(&b->strings, s, strlen(s), m->n_string_table)) {
		free(copy);
		return -1;
	}
	m->string_table[m->n_string_table] = copy;
	return m->n_string_table++;
}

/* type/unit as a ValueType. */
static int value_type(struct builder *b, pb_value_type *v, const char *type, const char *unit)
{
	long t = str(b, type), u = str(b, unit);

	perftools__profiles__value_type__init(v);
	v->type = t;
	v->unit = u;
	return t < 0 || u < 0 ? -1 : 0;
}

/* Sample types (samples/count, and cpu/nanoseconds when the period is
 * known; off the CPU, off_cpu/nanoseconds alone), the period, when and how
 * long, and as comments the title and what recording it cost. */
static int add_header(struct builder *b, const struct profile *p)
{
	pb_profile *m = &b->msg;
	const char *comments[] = { p->title, p->cost };
	int n = p->period_ns ? 2 : 1, err = 0;

	if (profile__is_heap(p)) {
		n = 1;		/* as Go's heap profiles name what is held */
		err |= value_type(b, &b->types[0], "inuse_space", "bytes");
	} else if (p->measure == PROFILE_ALLOC) {
		/* Go's heap profile: its types, in its order; what the other
		 * formats show (bytes allocated) is the default. */
		n = 4;
		err |= value_type(b, &b->types[0], "alloc_objects", "count");
		err |= value_type(b, &b->types[1], "alloc_space", "bytes");
		err |= value_type(b, &b->types[2], "inuse_objects", "count");
		err |= value_type(b, &b->types[3], "inuse_space", "bytes");
		err |= value_type(b, &b->period_type, "space", "bytes");
		m->period_type = &b->period_type;
		m->period = p->period_ns;	/* the mean bytes between two samples */
		m->default_sample_type = b->types[1].type;
	} else if (p->measure != PROFILE_SAMPLES) {
		n = 1;
		err |= value_type(b, &b->types[0], p->measure == PROFILE_WALL ? "wall" : "off_cpu",
				  "nanoseconds");
	} else {
		err |= value_type(b, &b->types[0], "samples", "count");
	}
	if (p->period_ns && p->measure == PROFILE_SAMPLES) {
		err |= value_type(b, &b->types[1], "cpu", "nanoseconds");
		err |= value_type(b, &b->period_type, "cpu", "nanoseconds");
		m->period_type = &b->period_type;
		m->period = p->period_ns;
	}
	for (int i = 0; i < n; i++)
		b->type_ptrs[i] = &b->types[i];
	m->sample_type = b->type_ptrs;
	m->n_sample_type = n;
	m->time_nanos = p->time_ns;
	m->duration_nanos = p->duration_ns;
	for (int i = 0; i < 2; i++)
		if (comments[i]) {
			long k = str(b, comments[i]);

			err |= k < 0;
			b->comments[m->n_comment++] = k;
		}
	m->comment = m->n_comment ? b->comments : NULL;
	return err ? -1 : 0;
}

/* One Function per distinct name, file and first line. */
static int add_functions(struct builder *b, const struct profile *p)
{
	size_t n = p->nframes + 1;
	long nfn;

	b->fn_of = malloc(n * sizeof(*b->fn_of));
	b->first = malloc(n * sizeof(*b->first));
	if (!b->fn_of || !b->first || (nfn = profile__functions(p, b->fn_of, b->first)) < 0)
		return -1;
	b->fns = calloc(nfn + 1, sizeof(*b->fns));
	b->fn_ptrs = calloc(nfn + 1, sizeof(*b->fn_ptrs));
	if (!b->fns || !b->fn_ptrs)
		return -1;
	for (long k = 0; k < nfn; k++) {
		const struct profile_frame *f = &p->frames[b->first[k]];
		pb_function *fn = &b->fns[k];

		perftools__profiles__function__init(fn);
		fn->id = k + 1;
		fn->name = str(b, f->name);
		fn->system_name = fn->name;
		fn->filename = str(b, f->file);
		fn->start_line = f->start_line;
		if (fn->name < 0 || fn->filename < 0)
			return -1;
		b->fn_ptrs[k] = fn;
	}
	b->msg.function = b->fn_ptrs;
	b->msg.n_function = nfn;
	return 0;
}

/* The id of the Mapping a C frame lies in, added when new; 0 when its file
 * is not known, -1 when out of memory. */
static long mapping_of(struct builder *b, const struct profile_frame *f)
{
	char *key = NULL;
	pb_mapping *m;
	long at;
	int len;

	if (f->kind != PROFILE_FRAME_C || !f->map_limit)
		return 0;
	len = asprintf(&key, "%llx-%llx %llx %s", (unsigned long long)f->map_start,
		       (unsigned long long)f->map_limit, (unsigned long long)f->map_off, f->file);
	if (len < 0)
		return -1;
	at = keymap__get(&b->map_index, key, len);
	if (at < 0) {
		at = b->msg.n_mapping;
		m = &b->maps[at];
		perftools__profiles__mapping__init(m);
		m->id = at + 1;
		m->memory_start = f->map_start;
		m->memory_limit = f->map_limit;
		m->file_offset = f->map_off;
		m->filename = str(b, f->file);
		m->has_functions = 1;	/* named here: not for pprof to symbolize */
		if (m->filename < 0 || keymap__put(&b->map_index, key, len, at))
			at = -2;
		else
			b->map_ptrs[b->msg.n_mapping++] = m;
	}
	free(key);
	return at + 1;
}

/* One Location per frame (its id: the frame's index + 1), with one Line. */
static int add_locations(struct builder *b, const struct profile *p)
{
	size_t n = p->nframes + 1;

	b->maps = calloc(n, sizeof(*b->maps));
	b->map_ptrs = calloc(n, sizeof(*b->map_ptrs));
	b->locs = calloc(n, sizeof(*b->locs));
	b->loc_ptrs = calloc(n, sizeof(*b->loc_ptrs));
	b->lines = calloc(n, sizeof(*b->lines));
	b->line_ptrs = calloc(n, sizeof(*b->line_ptrs));
	if (!b->maps || !b->map_ptrs || !b->locs || !b->loc_ptrs || !b->lines || !b->line_ptrs)
		return -1;
	b->msg.mapping = b->map_ptrs;
	for (size_t i = 0; i < p->nframes; i++) {
		const struct profile_frame *f = &p->frames[i];
		pb_location *loc = &b->locs[i];
		pb_line *line = &b->lines[i];
		long map = mapping_of(b, f);

		if (map < 0)
			return -1;
		perftools__profiles__location__init(loc);
		perftools__profiles__line__init(line);
		line->function_id = b->fn_of[i] + 1;
		line->line = f->line;
		b->line_ptrs[i] = line;
		loc->id = i + 1;
		loc->mapping_id = map;
		loc->address = f->kind == PROFILE_FRAME_C ? f->addr : 0;
		loc->line = &b->line_ptrs[i];
		loc->n_line = 1;
		b->loc_ptrs[i] = loc;
	}
	b->msg.location = b->loc_ptrs;
	b->msg.n_location = p->nframes;
	return 0;
}

/* The next row of p that o keeps (profile__next_kept), or, in an
 * allocation profile, that holds blocks in use though it allocated nothing
 * (in this interval of --rotate): pprof says what is in use, the other
 * formats only what was allocated. */
static const struct profile_row *next_row(const struct profile *p, const struct render_opts *o,
					  size_t *i)
{
	for (; p->measure == PROFILE_ALLOC && *i < p->nrows; ++*i) {
		const struct profile_row *r = &p->rows[*i];

		if ((!o->zone || zone__under(r->zone, o->zone)) &&
		    (profile_row__count(r) || r->alloc.inuse_bytes)) {
			++*i;
			return r;
		}
	}
	return p->measure == PROFILE_ALLOC ? NULL : profile__next_kept(p, o, i);
}

/* Room for every sample: one per row and VM state with samples. */
static int reserve_samples(struct builder *b, const struct profile *p,
			   const struct render_opts *o)
{
	const struct profile_row *r;
	size_t n = 0, ids = 0;

	for (size_t i = 0; (r = next_row(p, o, &i));) {
		for (int s = 0; s < NUPP_ST_MAX; s++)
			if (r->state[s] || (!s && !profile_row__count(r))) {
				n++;
				ids += r->nframes;
			}
	}
	b->samples = calloc(n + 1, sizeof(*b->samples));
	b->sample_ptrs = calloc(n + 1, sizeof(*b->sample_ptrs));
	b->labels = calloc(MAX_LABELS * n + 1, sizeof(*b->labels));
	b->label_ptrs = calloc(MAX_LABELS * n + 1, sizeof(*b->label_ptrs));
	b->loc_ids = calloc(ids + 1, sizeof(*b->loc_ids));
	b->values = calloc(VALUES * n + 1, sizeof(*b->values));
	b->msg.sample = b->sample_ptrs;
	return b->samples && b->sample_ptrs && b->labels && b->label_ptrs && b->loc_ids &&
	       b->values ? 0 : -1;
}

/* The next label of sample sm: key = str, or key = num when str is NULL. */
static int label(struct builder *b, pb_sample *sm, const char *key, const char *s, __u64 num)
{
	pb_label *l = &b->labels[b->msg.n_sample * MAX_LABELS + sm->n_label];

	perftools__profiles__label__init(l);
	l->key = str(b, key);
	if (s)
		l->str = str(b, s);
	else
		l->num = num;
	sm->label[sm->n_label++] = l;
	return l->key < 0 || l->str < 0 ? -1 : 0;
}

static int add_labels(struct builder *b, pb_sample *sm, const struct profile *p,
		      const struct profile_row *r, const struct render_opts *o, int state)
{
	char vm[32];
	int err = 0;

	sm->label = &b->label_ptrs[b->msg.n_sample * MAX_LABELS];
	if (!profile__is_heap(p) && state >= 0)	/* what a heap holds has no VM state */
		err |= label(b, sm, "vmstate", profile_state_names[state], 0);
	if (p->measure == PROFILE_WALL)	/* which half of the wall-clock time */
		err |= label(b, sm, "cpu", r->off_cpu ? "off" : "on", 0);
	if (r->zone[0])
		err |= label(b, sm, "zone", r->zone, 0);
	if (o->threads) {
		snprintf(vm, sizeof(vm), "0x%llx", (unsigned long long)r->g);
		err |= label(b, sm, "pid", NULL, r->pid);
		err |= label(b, sm, "tid", NULL, r->tid);
		err |= label(b, sm, "vm", vm, 0);
	}
	return err;
}

/* Row r's allocations in one VM state as Go's four values. Its bytes are by
 * state; its objects and what is in use are the row's, shared out by
 * those bytes. */
static void alloc_values(const struct profile_row *r, int state, int64_t v[VALUES])
{
	__u64 all = profile_row__count(r), part = state >= 0 ? r->state[state] : 0;
	double share = all ? (double)part / all : 1;	/* nothing allocated: all in use */

	v[0] = llround(r->alloc.objects * share);
	v[1] = part;
	v[2] = llround(r->alloc.inuse_objects * share);
	v[3] = llround(r->alloc.inuse_bytes * share);
}

/* A sample of row r's samples in one VM state (-1: a row with nothing
 * counted, kept for what it holds): its locations leaf first. */
static int add_sample(struct builder *b, const struct profile *p, const struct profile_row *r,
		      const struct render_opts *o, int state, size_t *ids)
{
	pb_sample *sm = &b->samples[b->msg.n_sample];
	__u32 first = profile_row__first_frame(p, r, o->root);
	int64_t *v = &b->values[VALUES * b->msg.n_sample];

	perftools__profiles__sample__init(sm);
	sm->location_id = &b->loc_ids[*ids];
	for (__u32 k = r->nframes; k-- > first;)
		sm->location_id[sm->n_location_id++] = r->frames[k] + 1;
	*ids += sm->n_location_id;
	v[0] = state >= 0 ? r->state[state] : 0;
	v[1] = v[0] * p->period_ns;
	if (p->measure == PROFILE_OFF_CPU || p->measure == PROFILE_WALL)
		v[0] = v[1];
	if (p->measure == PROFILE_ALLOC)
		alloc_values(r, state, v);
	sm->value = v;
	sm->n_value = b->msg.n_sample_type;
	if (add_labels(b, sm, p, r, o, state))
		return -1;
	b->sample_ptrs[b->msg.n_sample++] = sm;
	return 0;
}

static int add_samples(struct builder *b, const struct profile *p, const struct render_opts *o)
{
	const struct profile_row *r;
	size_t ids = 0;

	if (reserve_samples(b, p, o))
		return -1;
	for (size_t i = 0; (r = next_row(p, o, &i));) {
		/* A row with nothing counted is kept for its blocks in use
		 * (an allocation profile's): one sample, with no VM state. */
		if (!profile_row__count(r)) {
			if (add_sample(b, p, r, o, -1, &ids))
				return -1;
			continue;
		}
		for (int s = 0; s < NUPP_ST_MAX; s++)
			if (r->state[s] && add_sample(b, p, r, o, s, &ids))
				return -1;
	}
	return 0;
}

/* buf[0..len) gzip'd to out; 0 or -1. */
static int write_gzip(const void *buf, size_t len, FILE *out)
{
	unsigned char chunk[1 << 16];
	z_stream z = { .next_in = (Bytef *)buf, .avail_in = len };
	int ret;

	/* windowBits 15 + 16: a gzip header and trailer around the deflate. */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		ret = deflate(&z, Z_FINISH);
		if (ret == Z_STREAM_ERROR ||
		    fwrite(chunk, 1, sizeof(chunk) - z.avail_out, out) != sizeof(chunk) - z.avail_out)
			break;
	} while (ret != Z_STREAM_END);
	deflateEnd(&z);
	return ret == Z_STREAM_END ? 0 : -1;
}

static int pack_and_write(struct builder *b, FILE *out)
{
	size_t len = perftools__profiles__profile__get_packed_size(&b->msg);
	unsigned char *buf = malloc(len + 1);
	int ret;

	if (!buf)
		return -1;
	perftools__profiles__profile__pack(&b->msg, buf);
	ret = write_gzip(buf, len, out);
	free(buf);
	return ret;
}

static void builder_free(struct builder *b)
{
	for (size_t i = 0; i < b->msg.n_string_table; i++)
		free(b->msg.string_table[i]);
	free(b->msg.string_table);
	keymap__free(&b->strings);
	keymap__free(&b->map_index);
	free(b->fn_of);
	free(b->first);
	free(b->fns);
	free(b->fn_ptrs);
	free(b->maps);
	free(b->map_ptrs);
	free(b->locs);
	free(b->loc_ptrs);
	free(b->lines);
	free(b->line_ptrs);
	free(b->samples);
	free(b->sample_ptrs);
	free(b->labels);
	free(b->label_ptrs);
	free(b->loc_ids);
	free(b->values);
}

int pprof__write(const struct profile *p, const struct render_opts *o, FILE *out)
{
	struct builder b = { .msg = PERFTOOLS__PROFILES__PROFILE__INIT };
	int ret = -1;

	/* string_table[0] must be "". */
	if (str(&b, "") || add_header(&b, p) || add_functions(&b, p) || add_locations(&b, p) ||
	    add_samples(&b, p, o))
		goto out;
	ret = pack_and_write(&b, out);
out:
	builder_free(&b);
	return ret;
}
