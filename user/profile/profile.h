/* SPDX-License-Identifier: MIT */
/*
 * profile.h - the aggregated profile every output format is written from,
 * and its collapsed-stack rendering.
 *
 * A row is one distinct (process, thread, VM, zone, stack) with its sample
 * counts by VM state. Its stack is a list of frames, outermost first, each
 * kept once per profile with what the richer formats need (the chunk and
 * first line of a Lua function, the address and mapped file of a C one),
 * and its text: the frames' names joined by ';', as collapsed stacks show
 * them. Rendering merges rows into the report's text form: outermost
 * frame first, ';' between frames, a space, the count; lines by count
 * descending, then by stack. The profile also says what it is of (a title,
 * when and how long it was recorded, the sampling period) for the formats
 * that carry it.
 */
#ifndef NUPP_PROFILE_H
#define NUPP_PROFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>
#include "base/keymap.h"
#include "sampler_abi.h"

enum profile_frame_kind {
	PROFILE_FRAME_LUA,	/* a Lua function */
	PROFILE_FRAME_C,	/* a C function */
	PROFILE_FRAME_BUILTIN,	/* a fast function or a bytecode builtin */
	PROFILE_FRAME_UNKNOWN,	/* its memory could not be read: [unknown] */
	PROFILE_FRAME_KERNEL,	/* the kernel side of a wait (off the CPU): its
				 * system call and wait channel */
	PROFILE_FRAME_PATH,	/* a segment of a reference path (a heap's) */
};

struct profile_frame {
	char *name;		/* as in the collapsed stack (escaped as there) */
	char *file;		/* Lua: its chunk; C: the file mapped where it lies,
				 * "" when unknown; others "" */
	__u32 start_line;	/* Lua: the line the function starts at */
	__u32 line;		/* Lua: the line being run, 0 when unknown */
	__u64 addr;		/* C: the function's address */
	__u64 map_start, map_limit, map_off;	/* C: the mapping of file holding
						 * addr, and its file offset */
	enum profile_frame_kind kind;
};

/* What a profile's counts are. */
enum profile_measure {
	PROFILE_SAMPLES,	/* samples on the CPU, period_ns apart */
	PROFILE_OFF_CPU,	/* microseconds off the CPU (period_ns 1000) */
	PROFILE_WALL,		/* microseconds of wall-clock time, on the CPU
				 * (samples times their period) and off it */
	PROFILE_HEAP,		/* bytes of a heap by reference path (nupp-bpf
				 * heap -o): no VM state, all in state[0] */
	PROFILE_HEAP_GROWTH,	/* bytes a heap grew by, by reference path (heap
				 * --diff -o): as PROFILE_HEAP */
	PROFILE_ALLOC,		/* bytes allocated (record --alloc), an estimate
				 * from samples; profile_row.alloc has the rest */
};

/* What an allocation profile's row counts besides the bytes it allocated
 * (its state[]): estimates, as Go's heap profiles give them. */
struct profile_alloc {
	__u64 objects;		/* blocks allocated */
	__u64 inuse_objects;	/* of which not freed at the end */
	__u64 inuse_bytes;	/* and their bytes */
};

struct profile_row {
	__u32 pid, tid;
	__u64 g;			/* global_State of the VM */
	char *zone;			/* zone path, "" when none was open */
	char *stack;			/* frame names, ';' between, outermost first */
	__u32 *frames;			/* indexes into profile.frames, outermost first */
	__u32 nframes;
	bool unreadable;		/* some frames rendered as [unknown] */
	bool off_cpu;			/* its counts are time off the CPU (a wait) */
	__u64 state[NUPP_ST_MAX];	/* samples by enum nupp_state */
	struct profile_alloc alloc;	/* PROFILE_ALLOC: the row's other counts */
};

struct profile {
	struct profile_row *rows;
	size_t nrows, cap;
	struct profile_frame *frames;	/* distinct frames */
	size_t nframes, frames_cap;
	struct keymap frame_index;	/* a frame's fields -> its index */
	char *title;			/* what was profiled, NULL when not said */
	char *cost;			/* what recording it cost, NULL when not said
					 * (rotated files: a fleet watches it) */
	__u64 time_ns;			/* when recording started, since the epoch */
	__u64 duration_ns;		/* how long it recorded */
	__u64 period_ns;		/* between two samples of a thread, 0 unknown;
					 * off the CPU, what a count is; of
					 * allocations, the mean bytes between two */
	enum profile_measure measure;
};

/* Whether p is a heap's bytes by reference path (a census's, or its growth):
 * no VM states. */
bool profile__is_heap(const struct profile *p);

/* What a count of p is, in words: "samples", "µs off-CPU", "µs". */
const char *profile__unit(const struct profile *p);

/* Add src's rows to dst (frames and strings copied), each count times
 * num / den, rounded: samples into microseconds, say. 0, or -1 when out of
 * memory. */
int profile__add_scaled(struct profile *dst, const struct profile *src, __u64 num, __u64 den);

struct render_opts {
	const char *root;		/* module to cut stacks back to, or NULL */
	const char *zone;		/* zone path prefix to keep, or NULL */
	bool threads;			/* a leading "[pid/tid vm 0x…]" frame per thread */
	bool zones;			/* a leading "[zone path]" frame when a zone was open */
};

/* Names of enum nupp_state, as the summary and every format say them. */
extern const char *const profile_state_names[NUPP_ST_MAX];

/* The index of frame f in p, added (strings copied) when new; -1 when out
 * of memory. */
long profile__frame(struct profile *p, const struct profile_frame *f);

/* Number p's functions: frames of one name, file and first line are one
 * function, as collapsed stacks merge them (its frames differ in the line
 * being run; C functions of one name at two addresses are one). fn[i] receives frame i's function, first[k] (when
 * not NULL) the frame function k was first seen as; both hold nframes
 * entries. The number of functions, or -1 when out of memory. */
long profile__functions(const struct profile *p, __u32 *fn, __u32 *first);

/* Add a row of frames[0..n) (indexes from profile__frame, outermost first;
 * copied, as the zone is); its index, or -1 when out of memory. */
long profile__add(struct profile *p, __u32 pid, __u32 tid, __u64 g, const char *zone,
		  const __u32 *frames, __u32 n);
void profile__free(struct profile *p);
__u64 profile_row__count(const struct profile_row *r);

/* Set what the profile is of (copied); 0 or -1 when out of memory. */
int profile__set_title(struct profile *p, const char *title);
/* A line on what recording p cost ("nupp-bpf: ..."); 0 or -1 (ENOMEM). */
int profile__set_cost(struct profile *p, const char *cost);

/* Whether a zone path lies under the prefix ("a/b" holds "a/b" and "a/b/c"). */
bool zone__under(const char *zone, const char *prefix);

/* The stack cut back to its outermost frame from module root ("root:…"),
 * or the whole stack when no frame is from it. Returns a pointer into stack. */
const char *stack__cut_root(const char *stack, const char *root);

/* The same for a row's frames: the index of the first frame kept. */
__u32 profile_row__first_frame(const struct profile *p, const struct profile_row *r,
			       const char *root);

/* Whether a row has samples and passes the zone filter. */
bool profile_row__kept(const struct profile_row *r, const struct render_opts *o);
/* The next row from *i on that o keeps, *i moved past it; NULL after the last:
 *	for (size_t i = 0; (r = profile__next_kept(p, o, &i));) */
const struct profile_row *profile__next_kept(const struct profile *p, const struct render_opts *o,
					     size_t *i);

/* The text a row renders to in collapsed stacks, before its count: its
 * thread and zone frames as asked, and its stack cut at the root. A pointer
 * into the row's own stack when no thread or zone frame is asked for (*owned
 * NULL), else a malloc'ed string, also in *owned for the caller to free;
 * NULL when out of memory. */
const char *profile_row__text(const struct profile_row *r, const struct render_opts *o,
			      char **owned);

/* The collapsed stacks: rows of one text merged into a line, lines by count
 * descending, then by text. A line's text may point into the profile. */
struct collapsed_line {
	const char *text;
	char *owned;			/* text, when it was made for the line */
	__u64 count;
	size_t rank;			/* the line's place in text order */
};

struct collapsed {
	struct collapsed_line *lines;
	size_t n;
	__u64 samples;			/* their total count */
};

/* 0, or -1 when out of memory. */
int profile__collapse(const struct profile *p, const struct render_opts *o, struct collapsed *c);
void collapsed__free(struct collapsed *c);

/* Totals by state over the rows that pass the zone filter. */
void profile__totals(const struct profile *p, const struct render_opts *o,
		     __u64 state[NUPP_ST_MAX]);

/* Write the collapsed-stack text; returns the number of distinct lines, or
 * -1 on a write error. samples, when not NULL, receives the total count. */
long profile__write_collapsed(const struct profile *p, const struct render_opts *o,
			      FILE *out, __u64 *samples);

#endif /* NUPP_PROFILE_H */
