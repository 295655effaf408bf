// SPDX-License-Identifier: MIT
/* keymap.c - byte-string keys to integer values. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "keymap.h"
#include "util.h"

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
	s = find(m, key, len, fnv1a64(FNV1A64_INIT, key, len));
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

int keymap__put(struct keymap *m, const void *key, size_t len, long value)
{
	struct keymap_slot *s;
	uint64_t h = fnv1a64(FNV1A64_INIT, key, len);

	if (!fits(m->used + 1, m->cap) && rehash(m, m->cap ? m->cap * 2 : 64))
		return -1;
	s = find(m, key, len, h);
	if (!s->key) {
		s->key = malloc(len ? len : 1);
		if (!s->key)
			return -1;
		memcpy(s->key, key, len);
		s->len = len;
		s->hash = h;
		m->used++;
	}
	s->value = value;
	return 0;
}

void keymap__free(struct keymap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].key);
	free(m->slots);
	m->slots = NULL;
	m->cap = m->used = 0;
}
