// SPDX-License-Identifier: MIT
/*
 * test_replay.c - the sampler's walk (bpf/lj_sample.h, the code the BPF
 * sampler runs, compiled as plain C) and the trace mapper
 * (user/sampler/tracemap.c) replayed over processes captured once
 * (tests/replay/capture.h): what a sample taken at that instant gives, every
 * run, where a live test would need the timer to land there.
 *
 * Each tests/fixtures/replay/NAME.cap.gz has a NAME.want beside it: '#'
 * lines say how the moment was captured and why the rest is the truth; the
 * others are what the replay must print, exactly:
 *	state NAME		the VM state (enum nupp_state's name)
 *	err NAME		the walk's error, if any (sampler__err_name)
 *	truncated 0|1		whether frames were left past --depth
 *	trace none|mapped|unmapped	how the trace mapper fared
 *	stack FRAMES		the stack as collapsed output writes it, with
 *				lines, outermost first
 * A capture is walked with --depth from its .want's "depth N" line (default
 * 16), with the walk caches off (their reads are the same). Run as
 *	test_replay [--print FILE.cap.gz [DEPTH]]
 * --print writes what the replay gives, to review for a new .want.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "luajit/lj_build.h"
#include "luajit/symbolize.h"
#include "sampler/describe.h"
#include "sampler/tracemap.h"
#include "../replay/capture.h"

static struct capture cap;

#define LJ_READ(dst, n, addr)	capture_read(&cap, dst, n, addr)
#ifndef __noinline
#define __noinline
#endif
static __u32 walk_turns = NUPP_MAX_DEPTH;	/* as the sampler sets it: twice --depth at most */
static __u32 leaf_pc = 1;			/* --lines */
#include "lj_sample.h"

#define FIXTURES	"tests/fixtures/replay"

static const char *const state_names[NUPP_ST_MAX] = {	/* enum nupp_state */
	"compiled", "interpreted", "C", "GC", "compiling",
};
static const char *const err_names[NUPP_ERR_MAX] = {
	"no VM", "no thread", "bad frame base", "bad frame", "read fault",
	"no frame", "VM closed", "map full",
};

static void put_line(struct strbuf *out, const char *key, const char *value)
{
	strbuf__puts(out, key);
	strbuf__puts(out, " ");
	strbuf__puts(out, value);
	strbuf__puts(out, "\n");
}

static int mem_of_capture(void *ctx, void *dst, size_t n, __u64 addr)
{
	return capture_read(ctx, dst, n, addr);
}

static const struct lj_build *build_named(const char *id)
{
	for (int i = 0; i < lj_nknown_builds; i++)
		if (!strcmp(lj_known_builds[i].id, id))
			return &lj_known_builds[i];
	return NULL;
}

/* Replay the capture at path with --depth depth into out (the .want's lines). */
static int replay(const char *path, int depth, struct strbuf *out)
{
	static struct sampler_scratch sc;
	static struct nupp_frame mapped[2 * NUPP_MAX_DEPTH];
	struct mem_reader mem = { mem_of_capture, &cap };
	const struct lj_build *b;
	static struct nupp_proc proc;
	struct nupp_proc *p = &proc;
	struct symbolizer *sym;
	struct tracemap *tm;
	int err, n, res;

	if (capture_load(&cap, path)) {
		fprintf(stderr, "test_replay: %s: cannot be read, or of an older format (capture "
			"it again: make replay-fixtures)\n", path);
		return -1;
	}
	b = build_named(cap.head.build);
	if (!b) {
		fprintf(stderr, "test_replay: %s: build %s is not in the registry\n", path,
			cap.head.build);
		return -1;
	}
	sym = symbolizer__new(b, mem);
	tm = tracemap__new(b, mem, cap.head.vm_lo, cap.head.vm_hi);
	if (!sym || !tm || describe__layout(&b->layout, sym, p))
		return -1;
	/* The process's own, as sampler__describe read them at the capture. */
	p->vm_lo = cap.head.vm_lo;
	p->vm_hi = cap.head.vm_hi;
	for (int i = 0; i < NUPP_CODE_RANGES && i < CAPTURE_CODE; i++)
		p->code[i] = (struct nupp_code_range){ cap.head.code[i][0], cap.head.code[i][1] };
	p->max_frames = depth + 1;
	memset(&sc, 0, sizeof(sc));
	sc.key.g = cap.head.g;
	sc.regs = (struct vm_regs){ cap.head.ip, cap.head.dispatch, cap.head.base, cap.head.pc,
				    cap.head.rbp, cap.head.sp };
	err = sample_walk(p, &sc);
	put_line(out, "state", state_names[sc.state < NUPP_ST_MAX ? sc.state : 0]);
	if (err) {
		put_line(out, "err", err - 1 < NUPP_ERR_MAX ? err_names[err - 1] : "?");
		tracemap__free(tm);
		symbolizer__free(sym);
		return 0;
	}
	symbolizer__set_lines(sym, true);
	tracemap__poll(tm);
	res = tracemap__expand(tm, cap.head.g, sc.walk.frames, sc.walk.w.depth, mapped,
			       2 * NUPP_MAX_DEPTH, &n);
	put_line(out, "truncated", sc.key.truncated ? "1" : "0");
	put_line(out, "trace", res == TRACEMAP_MAPPED ? "mapped" :
		 res == TRACEMAP_UNMAPPED ? "unmapped" : "none");
	strbuf__puts(out, "stack ");
	if (res < 0 || symbolizer__stack_cut(sym, mapped, n, n - sc.key.truncated, out) < 0)
		return -1;
	strbuf__puts(out, "\n");
	tracemap__free(tm);
	symbolizer__free(sym);
	return 0;
}

/* The .want at path: its depth, and its lines but comments into want. */
static int read_want(const char *path, int *depth, struct strbuf *want)
{
	char line[65536];
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	*depth = 16;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (!strncmp(line, "depth ", 6)) {
			*depth = atoi(line + 6);
			continue;
		}
		strbuf__puts(want, line);
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	int failed = 0, passed = 0;
	struct dirent *e;
	DIR *d;

	if (argc >= 3 && !strcmp(argv[1], "--print")) {
		struct strbuf out = {};

		if (replay(argv[2], argc > 3 ? atoi(argv[3]) : 16, &out))
			return 1;
		fputs(out.buf ? out.buf : "", stdout);
		return 0;
	}
	d = opendir(FIXTURES);
	if (!d) {
		perror(FIXTURES);
		return 1;
	}
	while ((e = readdir(d))) {
		char cap_path[512], want_path[512];
		struct strbuf got = {}, want = {};
		size_t len = strlen(e->d_name);
		int depth;

		if (len < 8 || strcmp(e->d_name + len - 7, ".cap.gz"))
			continue;
		snprintf(cap_path, sizeof(cap_path), "%s/%s", FIXTURES, e->d_name);
		snprintf(want_path, sizeof(want_path), "%s/%.*s.want", FIXTURES, (int)(len - 7), e->d_name);
		if (read_want(want_path, &depth, &want) || replay(cap_path, depth, &got)) {
			printf("FAIL %s: no .want, or the replay failed\n", e->d_name);
			failed++;
			continue;
		}
		if (strcmp(got.buf ? got.buf : "", want.buf ? want.buf : "")) {
			printf("FAIL %s\n--- want\n%s--- got\n%s", e->d_name, want.buf, got.buf);
			failed++;
		} else {
			passed++;
		}
	}
	closedir(d);
	printf("test_replay: %d passed, %d failed\n", passed, failed);
	return failed || !passed;
}
