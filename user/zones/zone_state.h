/* SPDX-License-Identifier: MIT */
/*
 * zone_state.h - the memory nupp.profile.zone shares with profilers.
 *
 * Built into build/lua/nupp/profile/zone_state.so (installed next to the Lua
 * C modules), which lua/nupp/profile/zone.lua loads with ffi.load. One
 * instance per process, whatever number of Lua states load it.
 *
 * The gate. Zone enter/leave do nothing but test gate.word until a profiler
 * asks for zones:
 *   - gate.sem is the USDT semaphore of probe nupp:zone. The kernel adds one
 *     per uprobe attached to the probe (bpf_program__attach_usdt) and takes
 *     it back when the attaching perf event goes away, including on SIGKILL.
 *   - gate.local counts the in-process sessions (nupp.profile without BPF)
 *     that want zones; nupp_zone_hold() and nupp_zone_release() change it.
 * Lua reads both halves as one 32-bit word: a single load, nonzero when
 * anybody is listening.
 *
 * Reading zones from outside (the BPF sampler and its userspace):
 *   - find the symbol nupp_zone_state (dynsym of zone_state.so) in the target
 *     and check magic and version;
 *   - per sample, read the u32 at &nupp_zone_state.current: the id of the
 *     zone path open at that moment, 0 when none is;
 *   - map an id to its path by reading paths[id] (a char *, NUL-terminated,
 *     at most NUPP_ZONE_PATH_MAX bytes) for 0 < id <= npaths. Read npaths
 *     first, then paths: entries are written before npaths grows, strings
 *     and arrays are never freed, so a stale paths pointer stays readable.
 * The probe nupp:zone fires once per new path, when it is registered, with
 * arg1 = id and arg2 = the path (char *); nothing fires per enter/leave.
 */
#ifndef NUPP_ZONE_STATE_H
#define NUPP_ZONE_STATE_H

#include <stdint.h>
#include <stddef.h>

#define NUPP_ZONE_MAGIC		0x656e6f7a	/* "zone", little endian */
#define NUPP_ZONE_VERSION	1
#define NUPP_ZONE_PATH_MAX	1024		/* bytes, including the NUL */

struct nupp_zone_state {
	union {
		volatile uint32_t word;		/* nonzero: record zones */
		struct {
			volatile uint16_t sem;	/* USDT semaphore of nupp:zone */
			volatile uint16_t local;	/* in-process sessions holding it */
		};
	} gate;					/* offset 0 */
	volatile uint32_t current;		/* offset 4: open zone path id, 0 none */
	uint32_t magic;				/* offset 8: NUPP_ZONE_MAGIC */
	uint32_t version;			/* offset 12: NUPP_ZONE_VERSION */
	volatile uint32_t npaths;		/* offset 16: ids 1..npaths are valid */
	uint32_t capacity;			/* offset 20: entries of paths */
	char *const *volatile paths;		/* offset 24: paths[id]; [0] is "" */
};

extern struct nupp_zone_state nupp_zone_state;

/* Id of path (len bytes, no NUL needed), registering it on first use; 0 when
 * it is too long or memory ran out. The same path always gets the same id. */
uint32_t nupp_zone_register(const char *path, size_t len);

/* Open the gate for an in-process session; returns the new local count. */
uint32_t nupp_zone_hold(void);

/* Close what nupp_zone_hold opened; never goes below zero. */
uint32_t nupp_zone_release(void);

#endif /* NUPP_ZONE_STATE_H */
