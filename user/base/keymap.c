// SPDX-License-Identifier: MIT
/* keymap.c - byte-string keys to integer values. Keys are never removed, so
 * their copies are packed into blocks freed with the map: a profile of
 * thousands of new stacks a second pays no malloc per key, and touches
 * fewer new pages. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "keymap.h"

/* A key's hash, eight bytes at a step (FNV-1a's byte at a time was most of
 * a lookup of a frame's ~100-byte key), mixed at the end as splitmix64 does. */
static uint64_t key_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len, w;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
		h ^= h >> 29;
	}
	if (len) {
		w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
	}
	h ^= h >> 31;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 32);
}

static struct keymap_slot *find(const struct keymap *m, const void *key, size_t len, uint64_t h)
{
	size_t i = h & (m->cap - 1);

	for (;; i = (i + 1) & (m->cap - 1)) {
		struct keymap_slot *s = &m->slots[i];

		if (!s->key || (s->hash == h && s->len == len && !memcmp(s->key, key, len)))
			return s;
	}
}

long keymap__get(const struct keymap *m, const void *key, size_t len)
{
	struct keymap_slot *s;

	if (!m->cap)
		return -1;
	s = find(m, key, len, key_hash(key, len));
	return s->key ? s->value : -1;
}

/* A table of cap slots (a power of two) holding m's keys. */
static int rehash(struct keymap *m, size_t cap)
{
	struct keymap old = *m;

	m->cap = cap;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -1;
	}
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].key)
			*find(m, old.slots[i].key, old.slots[i].len, old.slots[i].hash) = old.slots[i];
	free(old.slots);
	return 0;
}

/* Kept under 3/4 full. */
static bool fits(size_t used, size_t cap)
{
	return used * 4 < cap * 3;
}

int keymap__reserve(struct keymap *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 64;

	while (!fits(n + 1, cap))
		cap *= 2;
	return cap == m->cap ? 0 : rehash(m, cap);
}

#define KEY_BLOCK_FIRST	1024		/* bytes of keys in a map's first block, */
#define KEY_BLOCK_MAX	(64 << 10)	/* twice as many in each next, up to this
					 * (or one larger key) */

struct keymap_block {
	struct keymap_block *next;	/* the block before */
	size_t size;			/* of bytes */
	char bytes[];
};

/* A copy of key in m's blocks, 8-byte aligned (an empty key takes 8 bytes
 * too: its slot needs an address); NULL when out of memory. */
static void *key_copy(struct keymap *m, const void *key, size_t len)
{
	size_t need = len ? (len + 7) & ~(size_t)7 : 8;
	char *at;

	if (need > m->keys_left) {
		size_t size = !m->keys ? KEY_BLOCK_FIRST :
			      m->keys->size < KEY_BLOCK_MAX ? 2 * m->keys->size : KEY_BLOCK_MAX;
		struct keymap_block *b;

		if (size < need)
			size = need;
		if (!(b = malloc(sizeof(*b) + size)))
			return NULL;
		*b = (struct keymap_block){ .next = m->keys, .size = size };
		m->keys = b;
		m->keys_left = size;
	}
	at = m->keys->bytes + m->keys->size - m->keys_left;
	m->keys_left -= need;
	return memcpy(at, key, len);
}

int keymap__put(struct keymap *m, const void *key, size_t len, long value)
{
	struct keymap_slot *s;
	uint64_t h = key_hash(key, len);

	if (!fits(m->used + 1, m->cap) && rehash(m, m->cap ? m->cap * 2 : 64))
		return -1;
	s = find(m, key, len, h);
	if (!s->key) {
		s->key = key_copy(m, key, len);
		if (!s->key)
			return -1;
		s->len = len;
		s->hash = h;
		m->used++;
	}
	s->value = value;
	return 0;
}

void keymap__free(struct keymap *m)
{
	while (m->keys) {
		struct keymap_block *b = m->keys;

		m->keys = b->next;
		free(b);
	}
	free(m->slots);
	*m = (struct keymap){ 0 };
}
