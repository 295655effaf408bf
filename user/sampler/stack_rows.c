// SPDX-License-Identifier: MIT
/*
 * stack_rows.c - each stack the kernel counts, named once as a row of the
 * profile. A key (target, thread, VM, zone, frames) is symbolized when the
 * ring announces its slot, or when a count or a wait finds a slot the ring
 * missed; compiled frames are first expanded through their trace's
 * snapshots (tracemap.c), and the keys of one trace span that expand to the
 * same frames share one row.
 */
#include <errno.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "base/keymap.h"
#include "base/procmem.h"
#include "luajit/codemap.h"
#include "luajit/symbolize.h"
#include "sampler_int.h"
#include "tracemap.h"
#include "zones/zones.h"

/* Frame k of the stack just symbolized into text, as a profile frame. */
static struct profile_frame frame_of(struct target *tg, const struct sym_frame *sf,
				     char *text)
{
	static const enum profile_frame_kind kinds[] = {
		[SYM_KIND_LUA] = PROFILE_FRAME_LUA, [SYM_KIND_C] = PROFILE_FRAME_C,
		[SYM_KIND_BUILTIN] = PROFILE_FRAME_BUILTIN, [SYM_KIND_UNREAD] = PROFILE_FRAME_UNKNOWN,
	};
	struct profile_frame f = {
		.name = text + sf->off, .file = "", .kind = kinds[sf->kind],
		.start_line = sf->start_line, .line = sf->line, .addr = sf->addr,
	};
	const struct code_mapping *m;

	if (sf->kind == SYM_KIND_LUA)
		f.file = (char *)sf->chunk;
	if (sf->kind == SYM_KIND_C && (m = codemap__find(tg->code, sf->addr))) {
		f.file = m->file;
		f.map_start = m->start;
		f.map_limit = m->limit;
		f.map_off = m->off;
	}
	return f;
}

/* Add the stack just symbolized (n frames: text and s->info) as a row of
 * key k; the row, or -1 when out of memory. */
static long add_row(struct sampler *s, struct target *tg, const struct nupp_stack_key *k,
		    struct strbuf *text, int n)
{
	__u32 ids[NUPP_MAX_DEPTH];
	long id;

	/* Each name ends where the next frame's ';' is: cut them apart. */
	for (int i = 0; i < n; i++)
		text->buf[s->info[i].off + s->info[i].len] = '\0';
	for (int i = 0; i < n; i++) {
		struct profile_frame f = frame_of(tg, &s->info[i], text->buf);

		if ((id = profile__frame(&s->rows, &f)) < 0)
			return -1;
		ids[i] = id;
	}
	return profile__add(&s->rows, k->pid, k->tid, k->g,
			    tg->zones ? zones__path(tg->zones, k->zone) : "", ids, n);
}

/* What s->seen holds for a key: its row (>= -2) and how its trace
 * position mapped (enum tracemap_result). */
#define KEY_VALUE(row, mapped)	(((row) + 2) * 8 + (mapped))
#define KEY_ROW(v)		((v) / 8 - 2)
#define KEY_MAPPED(v)		((int)((v) % 8))

/* The frames of k's stack into s->frames: those the ring brought with its
 * slot (frames, nframes; NULL when it did not), else from the stacks map,
 * where the kernel stores them before the first key of the stack. */
static int key_frames(struct sampler *s, const struct nupp_stack_key *k,
		      const struct nupp_frame *frames, __u32 nframes)
{
	if (frames && nframes == k->depth && nframes * sizeof(*frames) <= s->frames_size) {
		memcpy(s->frames, frames, nframes * sizeof(*frames));
		return 0;
	}
	return bpf_map__lookup_elem(s->skel->maps.stacks, &k->stack, sizeof(k->stack),
				    s->frames, s->frames_size, 0);
}


/* Whether the code of tg's stacks can still be read: a process on its way
 * out loses its memory (exit_mm) before it turns into a zombie, and a VM
 * that lua_close closes frees its code while the process runs on. */
static bool target_readable(const struct sampler *s, const struct target *tg)
{
	__u8 byte;

	return !__atomic_load_n(&s->procs[tg->slot].vm_closes, __ATOMIC_ACQUIRE) &&
	       procmem__alive(tg->pid) && !procmem__read(tg->pid, &byte, 1, tg->t->vm_lo);
}

/* An epoch that many ahead of the one seen is of the same run of the walk
 * caches: each run starts at a random epoch (enable_walk_caches). */
#define EPOCH_AHEAD_MAX		(1ULL << 32)

/* Render one kernel key into a row, once. A stack with frames that could not
 * be read because the target is gone (or its VM closed) is counted as
 * unsymbolized instead (row -2). On trace, the frames inlined into the
 * trace come first (*mapped: enum tracemap_result). The row, or -1 when out
 * of memory. */
static long symbolize_key(struct sampler *s, const struct nupp_stack_key *k,
			  const struct nupp_new_slot *e, int *mapped)
{
	struct target *tg = target_of(s, k->pid);
	struct strbuf stack = {};
	int unknown, depth = k->depth, shown = k->depth - k->truncated;
	long row = -2;

	*mapped = TRACEMAP_NONE;
	if (tg && !key_frames(s, k, e ? e->frames : NULL, e ? e->nframes : 0)) {
		/* A stack the ring announced is named at its sample's epoch. */
		if (e && tg->proc.gc_epoch && e->gc_epoch - tg->seen_epoch - 1 < EPOCH_AHEAD_MAX)
			forget_freed_code(s, tg, e->gc_epoch);
		/* On trace: the frames inlined into it, from its snapshots. */
		*mapped = tracemap__expand(tg->tm, k->g, s->frames, k->depth, s->mapped,
					   k->depth + NUPP_MAX_DEPTH, &depth);
		if (*mapped < 0)
			return -1;
		shown += depth - k->depth;
		if (shown > s->max_shown)
			shown = s->max_shown;
		/* The keys of a trace's instructions between two snapshots map
		 * to a few stacks: render each once. Without --lines the leaf's
		 * pc names nothing (off trace the sampler does not record it):
		 * the instructions of one frame's bytecode map to one stack. */
		if (*mapped == TRACEMAP_MAPPED) {
			if (!s->lines)
				s->mapped[0].pc &= NUPP_CALL_MASK;
			size_t n = sizeof(*s->mkey) + depth * sizeof(*s->mapped);

			*s->mkey = (struct mapped_key){ k->pid, k->tid, k->g, k->zone, depth, shown };
			memcpy(s->mkey->frames, s->mapped, depth * sizeof(*s->mapped));
			row = keymap__get(&s->rendered, s->mkey, n);
			if (row >= 0)
				goto seen;
			row = -2;
		}
		/* Until the GC epoch moves, no code was freed since the caches
		 * were last flushed: a cached prototype holds without a read. */
		symbolizer__trust(tg->sym, tg->proc.gc_epoch &&
				  (e ? e->gc_epoch : __atomic_load_n(&s->procs[tg->slot].gc_epoch,
								      __ATOMIC_RELAXED)) == tg->seen_epoch);
		tg->naming = e;
		unknown = symbolizer__stack_info(tg->sym, s->mapped, depth, shown, &stack, s->info);
		tg->naming = NULL;
		if (unknown == -ENOMEM)
			return -1;
		if (!unknown || target_readable(s, tg))
			row = add_row(s, tg, k, &stack, shown);
		if (row == -1)
			return -1;
		if (row >= 0)
			s->rows.rows[row].unreadable = unknown > 0;
		if (row >= 0 && *mapped == TRACEMAP_MAPPED &&
		    keymap__put(&s->rendered, s->mkey, sizeof(*s->mkey) + depth * sizeof(*s->mapped), row))
			return -1;
	}
seen:
	strbuf__free(&stack);
	if (row == -2)
		s->unsymbolized_keys++;
	return keymap__put(&s->seen, k, sizeof(*k), KEY_VALUE(row, *mapped)) ? -1 : row;
}

/* Slot idx of the counts table holds a key: give it its row. The ring's
 * record of it, with its stack's frames and what names them, when the ring
 * announced it (else NULL). */
int see_slot(struct sampler *s, __u32 idx, const struct nupp_new_slot *e)
{
	const struct nupp_stack_slot *slot;
	long row, v;
	int mapped;

	if (idx >= s->table_len || s->slot_row[idx])
		return 0;
	slot = &s->table[idx];
	if (!__atomic_load_n(&slot->ready, __ATOMIC_ACQUIRE))
		return 0;
	v = keymap__get(&s->seen, &slot->key, sizeof(slot->key));
	if (v == -1) {
		row = symbolize_key(s, &slot->key, e, &mapped);
	} else {
		row = KEY_ROW(v);
		mapped = KEY_MAPPED(v);
	}
	if (row == -1)
		return -ENOMEM;
	s->slot_row[idx] = SLOT_SEEN + row;
	s->slot_map[idx] = mapped;
	s->known[s->nknown++] = idx;
	return 0;
}
