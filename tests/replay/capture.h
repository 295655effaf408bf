/* SPDX-License-Identifier: MIT */
/*
 * capture.h - a LuaJIT process stopped once: one thread's registers, the
 * memory LuaJIT keeps its state in, and what the BPF sampler is told of the
 * process beyond its build's layout (its interpreter, the files' code near
 * it, its VM): the replay describes the build again from the registry
 * (describe__layout), so that a capture outlives changes of struct
 * nupp_proc and of the layout. tests/replay/capture.c writes one from a live
 * process; tests/unit/test_replay.c replays the sampler's walk and the
 * trace mapper over it, as they would run for a sample taken at that
 * instant.
 *
 * A file, gzip-compressed, holds in order: struct capture_head, then
 * head.nregions times a struct capture_region and its len bytes.
 */
#ifndef NUPP_CAPTURE_H
#define NUPP_CAPTURE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <linux/types.h>

#define CAPTURE_MAGIC	"NUPPCAP2"
#define CAPTURE_CODE	8	/* code ranges kept (NUPP_CODE_RANGES when written) */

struct capture_head {
	char magic[8];
	__u32 nregions, pad;
	char build[64];		/* the registry's id of the process's build (lj_build.id) */
	__u64 g;		/* the VM the thread runs (global_State) */
	__u64 ip, dispatch, base, pc, rbp, sp;	/* the registers the sampler reads */
	__u64 vm_lo, vm_hi;	/* nupp_proc's: the interpreter */
	__u64 code[CAPTURE_CODE][2];	/* nupp_proc's: the files' code near it */
	__u32 tid, pad2;
};

struct capture_region {
	__u64 addr, len;
};

struct capture {
	struct capture_head head;
	struct capture_region *regions;
	unsigned char **data;	/* each region's bytes */
};

/* Copy n bytes at addr of the captured process; 0, or -EFAULT outside
 * what was captured (as a read of memory not mapped). */
static inline int capture_read(const struct capture *c, void *dst, size_t n, __u64 addr)
{
	for (__u32 i = 0; i < c->head.nregions; i++) {
		const struct capture_region *r = &c->regions[i];

		if (addr >= r->addr && addr - r->addr <= r->len && n <= r->len - (addr - r->addr)) {
			memcpy(dst, c->data[i] + (addr - r->addr), n);
			return 0;
		}
	}
	return -EFAULT;
}

/* Load a capture; 0, or -1 (a file not there, truncated, or of another
 * format). */
static inline int capture_load(struct capture *c, const char *path)
{
	gzFile f = gzopen(path, "rb");
	int ok = 0;

	memset(c, 0, sizeof(*c));
	if (!f)
		return -1;
	if (gzread(f, &c->head, sizeof(c->head)) != (int)sizeof(c->head) ||
	    memcmp(c->head.magic, CAPTURE_MAGIC, 8) || c->head.nregions > 4096)
		goto out;
	c->regions = calloc(c->head.nregions, sizeof(*c->regions));
	c->data = calloc(c->head.nregions, sizeof(*c->data));
	if (!c->regions || !c->data)
		goto out;
	for (__u32 i = 0; i < c->head.nregions; i++) {
		struct capture_region *r = &c->regions[i];

		if (gzread(f, r, sizeof(*r)) != (int)sizeof(*r) || r->len > (1u << 30) ||
		    !(c->data[i] = malloc(r->len ? r->len : 1)) ||
		    gzread(f, c->data[i], (unsigned)r->len) != (int)r->len)
			goto out;
	}
	ok = 1;
out:
	gzclose(f);
	return ok ? 0 : -1;
}

#endif /* NUPP_CAPTURE_H */
