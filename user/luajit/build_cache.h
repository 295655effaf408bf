/* SPDX-License-Identifier: MIT */
/*
 * build_cache.h - what a LuaJIT file said of itself, kept between runs.
 *
 * Describing a build from its code (lj_derive.h, code_sites.h) decodes much
 * of it; a server's next restart, or the next attach at 3 a.m., maps the same
 * file. The results are kept per build, keyed by the SHA-256 of its .text
 * and checked against the file's size, its debug file and nupp-bpf's own
 * revision table. Nothing read from the cache is trusted more than a fresh
 * result: the layout is verified in the live VM and every probe address is
 * decoded before it is placed, as always; an entry that fails is dropped.
 *
 * Directory: $NUPP_CACHE_DIR, else /var/cache/nupp-bpf for root, else
 * $XDG_CACHE_HOME/nupp-bpf or ~/.cache/nupp-bpf. It must belong to the
 * user and be writable by nobody else, or it is not used.
 */
#ifndef NUPP_BUILD_CACHE_H
#define NUPP_BUILD_CACHE_H

#include <stdbool.h>
#include <stdio.h>
#include "code_sites.h"
#include "lj_derive.h"

/* Which build: its .text digest, the size of the file, and the separate
 * debug file that was (or was not) beside it. */
struct build_key {
	unsigned char text_sha256[32];
	__u64 file_size;
	char debug_file[256];		/* "" when none */
};

/* Fill k for the file at path (opened as ef) seen under root. 0, or -1. */
int build_cache__key(struct elf_file *ef, const char *path, const char *root, struct build_key *k);

/* A derived build's description: true when the cache held a valid one. */
bool build_cache__load_derived(const struct build_key *k, struct lj_derived *d);
void build_cache__store_derived(const struct build_key *k, const struct lj_derived *d);

/* A registry build's probe sites. */
bool build_cache__load_sites(const struct build_key *k, struct lj_code_sites *s);
void build_cache__store_sites(const struct build_key *k, const struct lj_code_sites *s);

/* The text of a cache entry, read from f as the loads above read the file,
 * for the build k: 0 for a registry build's entry (its sites in *s), 1 for
 * a derived build's (in *d, its sites in d->sites, a DWARF candidate's
 * layout &d->dwarf), -1 when it is not a valid entry of k (nothing written). */
int build_cache__parse(FILE *f, const struct build_key *k, struct lj_code_sites *s, struct lj_derived *d);

/* Forget the build: what was cached did not verify. */
void build_cache__drop(const struct build_key *k);

#endif
