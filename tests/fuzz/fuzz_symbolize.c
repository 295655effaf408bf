// SPDX-License-Identifier: MIT
/*
 * fuzz_symbolize.c - the symbolizer (user/luajit/symbolize.c) over memory images
 * the fuzzer makes: the GCproto headers, chunkname strings, bytecode, line
 * and variable info it reads to name a stack's frames, random or mutated
 * from the seeds in tests/fuzz/corpus/symbolize. Whatever the memory holds,
 * a stack renders to one line of collapsed-stack text: as many ';' as frames
 * less one, no control character, every '\' the start of a \xHH escape; the
 * frames' extents (symbolizer__stack_info) tile the text; rendering again
 * from the caches gives the same text; and a location (symbolizer__loc) is
 * one frame's text, escaped the same way.
 *
 * Input: flags (bit 0 a wrapping image, bit 1 lines on, bits 2.. the
 * registry build), the number of frames less one (mod 16; bit 7: cached
 * prototypes and chunk names are trusted, symbolizer__trust), then per frame
 * its kind (enum nupp_fn_kind, mod 4: 3 is no kind), the offset in the image
 * of its proto or C function (its ffid, for a builtin) and the offset of its
 * pc with the call kind in the low bits (u32 each); the image follows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "luajit/lj_build.h"
#include "luajit/symbolize.h"
#include "fuzz_image.h"

#define FRAMES_MAX 16

static void fail(const char *what, const struct strbuf *out)
{
	fprintf(stderr, "fuzz_symbolize: %s: \"%s\"\n", what, out->buf ? out->buf : "");
	abort();
}

static int image_reader(void *ctx, void *dst, size_t n, __u64 addr)
{
	return image_read(ctx, dst, n, addr);
}

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* One frame's text, escaped: no ';', no control character, every '\' the
 * start of \xHH. */
static void check_escaped(const char *s, size_t n, const struct strbuf *out)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f || c == ';')
			fail("a byte that breaks the format", out);
		if (c == '\\' && (n - i < 4 || s[i + 1] != 'x' || !is_hex(s[i + 2]) || !is_hex(s[i + 3])))
			fail("a '\\' that starts no \\xHH escape", out);
	}
}

static void check_stack(struct symbolizer *sym, const struct nupp_frame *frames, int n)
{
	struct strbuf out = { 0 }, again = { 0 }, info_out = { 0 };
	struct sym_frame info[FRAMES_MAX];
	int r = symbolizer__stack(sym, frames, n, &out);
	size_t at = 0;

	if (r < 0 || r > n)
		fail("a count of unknown frames out of range", &out);
	if (symbolizer__stack(sym, frames, n, &again) != r || strcmp(out.buf, again.buf))
		fail("a second rendering that differs", &again);
	if (symbolizer__stack_info(sym, frames, n, n, &info_out, info) != r ||
	    strcmp(out.buf, info_out.buf))
		fail("stack_info's text differs", &info_out);
	for (int k = 0; k < n; k++) {
		if (info[k].off != at || info[k].off + info[k].len > out.len)
			fail("frame extents that do not tile the text", &out);
		check_escaped(out.buf + at, info[k].len, &out);
		at = info[k].off + info[k].len;
		if (k + 1 < n && out.buf[at++] != ';')
			fail("frames not separated by ';'", &out);
	}
	if (at != out.len)
		fail("text beyond the last frame", &out);
	strbuf__free(&out);
	strbuf__free(&again);
	strbuf__free(&info_out);
}

/* The location of each Lua frame's pc, as the trace collector asks it. */
static void check_locs(struct symbolizer *sym, const struct nupp_frame *frames, int n)
{
	for (int k = 0; k < n; k++) {
		__u64 pt = NUPP_FN_VALUE(frames[k].fn);
		__u32 pos = (__u32)(frames[k].pc >> 2) & 0xffff;
		struct strbuf out = { 0 };

		if (NUPP_FN_KIND(frames[k].fn) != NUPP_FN_LUA)
			continue;
		if (symbolizer__loc(sym, pt, pos, &out) < 0)
			fail("no memory for a location", &out);
		check_escaped(out.buf, out.len, &out);
		symbolizer__frame_line(sym, &frames[k]);
		strbuf__free(&out);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	size_t left = size;
	unsigned flags = header_take(&p, &left, 1);
	unsigned nbyte = header_take(&p, &left, 1);
	int n = nbyte % FRAMES_MAX + 1;
	const struct lj_build *b = &lj_known_builds[(flags >> 2) % lj_nknown_builds];
	struct nupp_frame frames[FRAMES_MAX];
	static struct image img;
	struct symbolizer *sym;

	for (int k = 0; k < n; k++) {
		unsigned kind = header_take(&p, &left, 1) % 4;
		__u64 v = header_take(&p, &left, 4), pc = header_take(&p, &left, 4);

		frames[k].fn = NUPP_FN(kind, kind == NUPP_FN_FF ? v & 0xff : IMAGE_BASE + v);
		frames[k].pc = IMAGE_BASE + pc;
	}
	img = (struct image){ .data = p, .size = left, .wrap = flags & 1 };
	sym = symbolizer__new(b, (struct mem_reader){ .read = image_reader, .ctx = &img });
	if (!sym)
		return 0;
	symbolizer__set_lines(sym, flags & 2);
	symbolizer__trust(sym, nbyte & 0x80);
	check_stack(sym, frames, n);
	check_locs(sym, frames, n);
	symbolizer__free(sym);
	return 0;
}
