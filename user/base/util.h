/* SPDX-License-Identifier: MIT */
/* util.h - the helpers every part of nupp-bpf needs: a clock, a hash, UTF-8,
 * growing arrays. */
#ifndef NUPP_UTIL_H
#define NUPP_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

/* A little-endian word at byte off of b, a copy of another process's
 * memory (x86-64: the target's byte order is ours), at any alignment. */
static inline uint64_t load_u64(const void *b, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)b + off, 8);
	return v;
}

static inline uint32_t load_u32(const void *b, size_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)b + off, 4);
	return v;
}

/* Seconds on CLOCK_MONOTONIC: durations and deadlines, immune to clock steps. */
static inline double monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* nupp-bpf's own CPU seconds so far, all its threads. */
static inline double own_cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Nanoseconds on CLOCK_REALTIME since the epoch: the wall-clock time a
 * profile is stamped with, never a duration. */
static inline uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Room for one more element in the array v (a pointer to its first), of
 * which n are used and cap allocated: realloc'ed to twice cap when full
 * (to first elements when empty), v and cap updated. 0, or -1 out of memory
 * with v and cap as they were. */
#define ARRAY_ROOM(v, n, cap, first) __extension__ ({				\
	int room_err_ = 0;							\
	if ((size_t)(n) >= (size_t)(cap)) {					\
		size_t room_want_ = (cap) ? 2 * (size_t)(cap) : (size_t)(first);	\
		void *room_more_ = realloc((v), room_want_ * sizeof(*(v)));	\
		if (room_more_) {						\
			(v) = room_more_;					\
			(cap) = room_want_;					\
		} else {							\
			room_err_ = -1;						\
		}								\
	}									\
	room_err_;								\
})

#define FNV1A64_INIT 0xcbf29ce484222325ULL

/* FNV-1a, 64 bits, of n bytes at p, continuing from h (FNV1A64_INIT to
 * start): the hash of the in-memory tables, not a digest of anything kept. */
static inline uint64_t fnv1a64(uint64_t h, const void *p, size_t n)
{
	for (const unsigned char *c = p; n--; c++)
		h = (h ^ *c) * 0x100000001b3ULL;
	return h;
}

#define FNV1A32_INIT 0x811c9dc5U

/* FNV-1a, 32 bits, of n bytes at p, continuing from h (FNV1A32_INIT to
 * start): the frame shades of the flame graph, and the bytecode schema that
 * must match lua/nupp/profile/trace.lua's fnv1a32. */
static inline uint32_t fnv1a32(uint32_t h, const void *p, size_t n)
{
	for (const unsigned char *c = p; n--; c++)
		h = (h ^ *c) * 0x01000193U;
	return h;
}

/* n in decimal, written back from end (20 bytes at most); where it starts.
 * The writers of many numbers (collapsed counts, flame graph frames, frame
 * lines) use it: a printf per number was a large share of their time. */
static inline char *u64_digits(char *end, unsigned long long n)
{
	do
		*--end = '0' + n % 10;
	while ((n /= 10));
	return end;
}

/* The length of the UTF-8 sequence at s, of the n bytes there (1-4; a
 * NUL-terminated string may pass 4): 1 for ASCII, 0 when the bytes are not
 * well-formed UTF-8 (RFC 3629: no overlong form, no surrogate, nothing past
 * U+10FFFF). Chunk names may hold any byte; every output is UTF-8. */
static inline int utf8_len(const unsigned char *s, size_t n)
{
	int len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 :
		  s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;

	if ((size_t)len > n)
		return 0;
	for (int i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return len;
}

#endif
