// SPDX-License-Identifier: MIT
/* zone_state.c - the gate and the zone path table of nupp.profile.zone. */
#define _SDT_HAS_SEMAPHORES 1
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include "zone_state.h"

/*
 * The whole state lives in .probes, the section sdt.h semaphores go to, so
 * that the semaphore (gate.sem, offset 0) and the local count share one word.
 * nupp_zone_semaphore is the name sdt.h derives for probe nupp:zone; it is
 * an alias of the state's first halfword rather than a variable of its own.
 */
__attribute__((section(".probes"), aligned(64), visibility("default")))
struct nupp_zone_state nupp_zone_state = {
	.magic = NUPP_ZONE_MAGIC,
	.version = NUPP_ZONE_VERSION,
};

__asm__(".globl nupp_zone_semaphore\n"
	".type nupp_zone_semaphore, @object\n"
	".size nupp_zone_semaphore, 2\n"
	".set nupp_zone_semaphore, nupp_zone_state\n");
extern volatile unsigned short nupp_zone_semaphore;

static pthread_mutex_t zone_lock = PTHREAD_MUTEX_INITIALIZER;
static char *zone_empty[1] = { "" };

/* Find path among the registered ones; 0 when absent. Caller holds the lock. */
static uint32_t zone_find(const char *path, size_t len)
{
	uint32_t id;

	for (id = 1; id <= nupp_zone_state.npaths; id++) {
		const char *p = nupp_zone_state.paths[id];

		if (strncmp(p, path, len) == 0 && p[len] == '\0')
			return id;
	}
	return 0;
}

/* Make room for one more entry; the old array is kept for stale readers. */
static int zone_grow(void)
{
	uint32_t cap = nupp_zone_state.capacity ? nupp_zone_state.capacity * 2 : 64;
	char **paths = calloc(cap, sizeof(*paths));

	if (!paths)
		return -1;
	if (nupp_zone_state.paths)
		memcpy(paths, (const void *)nupp_zone_state.paths,
		       (nupp_zone_state.npaths + 1) * sizeof(*paths));
	else
		paths[0] = zone_empty[0];
	nupp_zone_state.paths = paths;
	nupp_zone_state.capacity = cap;
	return 0;
}

uint32_t nupp_zone_register(const char *path, size_t len)
{
	uint32_t id;
	char *copy;

	if (len == 0)
		return 0;
	if (len >= NUPP_ZONE_PATH_MAX || memchr(path, '\0', len))
		return 0;
	pthread_mutex_lock(&zone_lock);
	id = zone_find(path, len);
	if (id)
		goto unlock;
	if (nupp_zone_state.npaths + 1 >= nupp_zone_state.capacity && zone_grow())
		goto unlock;
	copy = malloc(len + 1);
	if (!copy)
		goto unlock;
	memcpy(copy, path, len);
	copy[len] = '\0';
	id = nupp_zone_state.npaths + 1;
	((char **)nupp_zone_state.paths)[id] = copy;
	__atomic_store_n(&nupp_zone_state.npaths, id, __ATOMIC_RELEASE);
	STAP_PROBE2(nupp, zone, id, copy);
unlock:
	pthread_mutex_unlock(&zone_lock);
	return id;
}

uint32_t nupp_zone_hold(void)
{
	return __atomic_add_fetch(&nupp_zone_state.gate.local, 1, __ATOMIC_SEQ_CST);
}

uint32_t nupp_zone_release(void)
{
	uint16_t old = __atomic_load_n(&nupp_zone_state.gate.local, __ATOMIC_SEQ_CST);

	while (old && !__atomic_compare_exchange_n(&nupp_zone_state.gate.local,
						   &old, old - 1, 0,
						   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	return old ? old - 1u : 0u;
}
