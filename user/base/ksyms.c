// SPDX-License-Identifier: MIT
/* ksyms.c - the running kernel's symbols (ksyms.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ksyms.h"

struct ksym {
	__u64 addr;
	char *name;
	bool text;
};

struct ksyms {
	struct ksym *syms;	/* by address */
	size_t n;
	char *names;		/* every name, one after another */
};

static int by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

struct ksyms *ksyms__load(void)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	struct ksyms *k = calloc(1, sizeof(*k));
	size_t cap = 0, names_len = 0, names_cap = 0;
	char line[512], name[256], type;
	unsigned long long addr;

	if (!f || !k) {
		if (f)
			fclose(f);
		free(k);
		return NULL;
	}
	/* Names go into one block, whose offsets become pointers at the end
	 * (the block moves as it grows). */
	while (fgets(line, sizeof(line), f)) {
		size_t len;

		/* Modules' symbols carry "\t[module]": the name is the third field. */
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3)
			continue;
		len = strlen(name) + 1;
		if (k->n == cap) {
			struct ksym *s = realloc(k->syms, (cap = cap ? 2 * cap : 65536) * sizeof(*s));

			if (!s)
				goto fail;
			k->syms = s;
		}
		if (names_len + len > names_cap) {
			char *s = realloc(k->names, names_cap = 2 * (names_len + len) + 1048576);

			if (!s)
				goto fail;
			k->names = s;
		}
		memcpy(k->names + names_len, name, len);
		k->syms[k->n++] = (struct ksym){ addr, (char *)names_len,
						 type == 't' || type == 'T' };
		names_len += len;
	}
	fclose(f);
	for (size_t i = 0; i < k->n; i++)
		k->syms[i].name = k->names + (size_t)k->syms[i].name;
	qsort(k->syms, k->n, sizeof(*k->syms), by_addr);
	return k;
fail:
	fclose(f);
	ksyms__free(k);
	return NULL;
}

void ksyms__free(struct ksyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	free(k);
}

__u64 ksyms__addr(const struct ksyms *k, const char *name)
{
	for (size_t i = 0; k && i < k->n; i++)
		if (!strcmp(k->syms[i].name, name))
			return k->syms[i].addr;
	return 0;
}

const char *ksyms__clone_of(const struct ksyms *k, const char *prefix)
{
	size_t len = strlen(prefix);

	for (size_t i = 0; k && i < k->n; i++)
		if (k->syms[i].text && !strncmp(k->syms[i].name, prefix, len) &&
		    (!k->syms[i].name[len] || k->syms[i].name[len] == '.'))
			return k->syms[i].name;
	return NULL;
}

const char *ksyms__name(const struct ksyms *k, __u64 addr)
{
	size_t lo = 0, hi = k ? k->n : 0;

	if (!addr)
		return NULL;
	/* The last symbol at or below addr... */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* ...that is code (data symbols may sit among the text ones). */
	while (lo > 0 && !k->syms[lo - 1].text)
		lo--;
	return lo ? k->syms[lo - 1].name : NULL;
}

int ksyms__lookup(const char *const names[], __u64 addrs[], int n)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512];
	int left = n;

	if (!f)
		return -errno;
	memset(addrs, 0, n * sizeof(*addrs));
	/* "ADDR TYPE NAME\n", or "ADDR TYPE NAME\t[MODULE]\n" for a module's. */
	while (left && fgets(line, sizeof(line), f)) {
		char *name = strchr(line, ' ');
		size_t len;

		if (!name || !(name = strchr(name + 1, ' ')))
			continue;
		len = strcspn(++name, "\t\n");
		if (name[len] != '\n')
			continue;
		for (int i = 0; i < n; i++)
			if (!addrs[i] && strlen(names[i]) == len && !memcmp(name, names[i], len) &&
			    (addrs[i] = strtoull(line, NULL, 16)))
				left--;
	}
	fclose(f);
	return 0;
}
