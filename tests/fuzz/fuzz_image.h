/* SPDX-License-Identifier: MIT */
/*
 * fuzz_image.h - a target process's memory made by the fuzzer, for the fuzz
 * targets that read LuaJIT objects (the frame walk, the symbolizer).
 *
 * An input is a short header the target reads first, then the image: bytes
 * that stand at IMAGE_BASE in the target's address space. A strict image
 * fails every read outside itself, as a read of unmapped memory fails; a
 * wrapping image answers every address below 2^47 with its bytes again
 * (modulo its size), so that any pointer the fuzzer writes lands somewhere
 * and the walk or the symbolizer goes on to read what is there.
 */
#ifndef NUPP_FUZZ_IMAGE_H
#define NUPP_FUZZ_IMAGE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define IMAGE_BASE	0x40000000ULL	/* 8-aligned, as LuaJIT's objects are */

struct image {
	const uint8_t *data;
	size_t size;
	int wrap;		/* answer every address, modulo size */
};

/* Copy n bytes at target address addr; 0 or -EFAULT. */
static inline int image_read(const struct image *im, void *dst, size_t n, uint64_t addr)
{
	uint8_t *d = dst;

	if (!im->size || addr < IMAGE_BASE || addr + n < addr)
		return -EFAULT;
	if (!im->wrap) {
		if (addr - IMAGE_BASE > im->size || n > im->size - (addr - IMAGE_BASE))
			return -EFAULT;
		memcpy(d, im->data + (addr - IMAGE_BASE), n);
		return 0;
	}
	if (addr + n > (1ULL << 47))
		return -EFAULT;
	for (size_t i = 0; i < n; i++)
		d[i] = im->data[(addr - IMAGE_BASE + i) % im->size];
	return 0;
}

/* A little-endian number of n bytes from the header at *p, consumed. */
static inline uint64_t header_take(const uint8_t **p, size_t *left, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n && *left; i++, (*p)++, (*left)--)
		v |= (uint64_t)**p << (8 * i);
	return v;
}

#endif /* NUPP_FUZZ_IMAGE_H */
