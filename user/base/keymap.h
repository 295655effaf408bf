/* SPDX-License-Identifier: MIT */
/* keymap.h - byte-string keys to integer values (open addressing). */
#ifndef NUPP_KEYMAP_H
#define NUPP_KEYMAP_H

#include <stddef.h>
#include <stdint.h>

struct keymap {
	struct keymap_slot {
		void *key;	/* a copy in keys, NULL when free */
		size_t len;
		uint64_t hash;
		long value;
	} *slots;
	size_t cap, used;
	struct keymap_block *keys;	/* the copies, packed; freed as one */
	size_t keys_left;		/* bytes free in the newest block */
};

/* Value stored under key, or -1 when absent. */
long keymap__get(const struct keymap *m, const void *key, size_t len);
/* Store value under key (replacing); 0, or -1 when out of memory. */
int keymap__put(struct keymap *m, const void *key, size_t len, long value);
/* Room for n keys in all without growing (a size known ahead saves the
 * rehashes of growing to it); 0, or -1 when out of memory. */
int keymap__reserve(struct keymap *m, size_t n);
void keymap__free(struct keymap *m);

#endif /* NUPP_KEYMAP_H */
