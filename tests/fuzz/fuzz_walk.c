// SPDX-License-Identifier: MIT
/*
 * fuzz_walk.c - the sampler's frame walk (bpf/lj_walk.h, compiled as plain
 * C) over memory images the fuzzer makes: random bytes, and mutations of
 * the seed stacks in tests/fuzz/corpus/walk (real frame layouts of a GC64
 * build: Lua frames called from Lua, C and pcall frames, continuations,
 * vararg pseudo-frames, dummy frames). Each image is walked three times:
 * without the caches, then with them cold and warm, as the sampler walks.
 * Whatever the memory holds, every step that goes on must move down the
 * stack (so that a walk ends), a walk keeps at most max frames, each of
 * a kind the symbolizer knows, its error is one of enum nupp_err and its
 * hash is the hash of the frames it kept.
 *
 * Input: flags (bit 0 a wrapping image, bits 1.. the registry build), max
 * frames, then the start frame's link slot, the stack's bottom and the
 * lua_State as slot numbers in the image (u16 each); the image follows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/types.h>
#include "luajit/lj_build.h"
#include "fuzz_image.h"

static struct image img;

#define LJ_READ(dst, n, addr)	image_read(&img, dst, n, addr)
#include "lj_walk.h"

/* The sampler's budget of steps, at its largest: frames that are not shown
 * (dummy and vararg frames) take steps too, and a walk that runs out of
 * them is cut there. */
#define STEPS_MAX	NUPP_MAX_DEPTH

static void fail(const char *what, const struct lj_walk *w)
{
	fprintf(stderr, "fuzz_walk: %s (f 0x%llx, depth %u, err %d)\n", what,
		(unsigned long long)w->f, w->depth, w->err);
	abort();
}

static void check_frames(const struct lj_walk_mem *m)
{
	const struct lj_walk *w = &m->w;
	__u64 h = 0;

	for (__u32 i = 0; i < w->depth; i++) {
		const struct nupp_frame *fr = &m->frames[i];

		if (NUPP_FN_KIND(fr->fn) > NUPP_FN_FF)
			fail("a frame of no known kind", w);
		if ((fr->pc & NUPP_CALL_MASK) == NUPP_CALL_MASK)
			fail("a frame called in no known way", w);
		h = lj_walk_hash(lj_walk_hash(h, fr->fn), fr->pc);
	}
	if (h != w->hash)
		fail("the hash is not the hash of the frames kept", w);
}

static void walk(struct lj_walk_mem *m, const struct lj_layout *lj, struct lj_walk start)
{
	struct lj_walk *w = &m->w;

	*w = start;
	for (int steps = 0; steps < STEPS_MAX; steps++) {
		__u64 f = w->f;

		if (lj_walk_step(m, lj))
			break;
		if (w->f >= f)
			fail("a step that does not move down the stack", w);
	}
	if (w->depth > w->max)
		fail("more frames than max", w);
	if (w->err < 0 || w->err > NUPP_ERR_MAX)
		fail("an error outside enum nupp_err", w);
	check_frames(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct lj_walk_mem m;
	const uint8_t *p = data;
	size_t left = size;
	unsigned flags = header_take(&p, &left, 1);
	unsigned max = header_take(&p, &left, 1) % NUPP_MAX_DEPTH + 1;
	__u64 f = IMAGE_BASE + 8 * header_take(&p, &left, 2);
	__u64 bot = IMAGE_BASE + 8 * header_take(&p, &left, 2);
	__u64 L = IMAGE_BASE + 8 * header_take(&p, &left, 2);
	const struct lj_layout *lj = &lj_known_builds[(flags >> 1) % lj_nknown_builds].layout;
	struct lj_walk start = { .L = L, .f = f, .bot = bot, .max = max };

	img = (struct image){ .data = p, .size = left, .wrap = flags & 1 };
	memset(&m, 0, sizeof(m));
	walk(&m, lj, start);
	start.epoch = 1;
	walk(&m, lj, start);
	walk(&m, lj, start);
	return 0;
}
