/* SPDX-License-Identifier: MIT */
/*
 * lj_target.h - the LuaJIT inside a target process.
 *
 * Found by content: every executable file mapping of the process is checked
 * against the build registry (SHA-256 of .text), then for LuaJIT symbols in
 * .symtab. The layout is then verified against the live process by finding
 * its GG_State (global_State signature) in memory.
 */
#ifndef NUPP_LJ_TARGET_H
#define NUPP_LJ_TARGET_H

#include <limits.h>
#include <sys/types.h>
#include "lj_build.h"
#include "build_cache.h"
#include "lj_derive.h"

#define LJ_TARGET_MAX_VMS 16

struct lj_target {
	pid_t pid;
	char path[PATH_MAX];		/* the ELF file holding LuaJIT, openable by us */
	char shown[PATH_MAX];		/* that file's name as the target sees it */
	__u64 bias;			/* runtime address = ELF vaddr + bias */
	const struct lj_build *build;	/* registry entry; NULL for a derived build */
	struct lj_build local;		/* the entry used when build is NULL */
	struct lj_sym local_syms[8];	/* its code sites */
	struct lj_derived derived;	/* what describes a derived build (lj_derive.h) */
	struct build_key key;		/* the build, for the build cache */
	bool cached;			/* its description came from the build cache */
	struct lj_code_sites sites;	/* its probe sites, from its code (ELF vaddrs) */
	const struct lj_revision *rev;	/* the revision whose names it uses, if known */
	char local_desc[256];		/* local.package: how it was described */
	struct lj_layout layout;
	__u64 vm_lo, vm_hi;		/* runtime interpreter code range */
	__u64 gs[LJ_TARGET_MAX_VMS];	/* global_States found in memory */
	int ngs;
	char layout_why[128];		/* a signature whose fields did not verify */
};

#define LJ_TARGET_UNSUPPORTED (-2)

/* Find and identify LuaJIT in process pid. 0, or -1 with a one-line reason
 * in err (without the "nupp-bpf: error: " prefix): LJ_TARGET_UNSUPPORTED
 * when it holds LuaJIT that cannot be used, -1 when none (or no access). */
int lj_target__open(struct lj_target *t, pid_t pid, char *err, size_t errsz);

/* lj_target__open without the memory scan: for a caller that knows its VMs
 * (the Lua module profiling its own process). */
int lj_target__identify(struct lj_target *t, pid_t pid, char *err, size_t errsz);

/* Identify the LuaJIT in an ELF file, as for a process that maps it (no
 * VM, no bias): what `nupp-bpf inspect FILE` shows. */
int lj_target__open_file(struct lj_target *t, const char *path, char *err, size_t errsz);

/* The build's description: the registry entry, or the derived one. */
const struct lj_build *lj_target__build(const struct lj_target *t);

/* ELF vaddr of a named symbol of the target's build, 0 when absent. */
__u64 lj_target__sym(const struct lj_target *t, const char *name);

/* ELF vaddr of a function the target's file defines (an exported one of a
 * stripped build too, from .dynsym), 0 when absent. */
__u64 lj_target__func(const struct lj_target *t, const char *name);

/* File offset (what a uprobe attaches at) of an ELF vaddr, 0 when unmapped. */
__u64 lj_target__file_offset(const struct lj_target *t, __u64 vaddr);

/* A digest of the executable file mappings of process pid (0: unreadable).
 * A process found without LuaJIT can come to hold one only by exec or by
 * mapping code, which change it: a caller waiting for LuaJIT identifies the
 * process again only then. */
__u64 lj_target__code_digest(pid_t pid);

/* The files' code mappings of process pid within +-2 GiB of address a
 * (where LuaJIT puts trace code), adjacent ones merged, up to n of them
 * into lo[], hi[]: the nearest to a when there are more. How many. */
int lj_target__code_near(pid_t pid, __u64 a, __u64 *lo, __u64 *hi, int n);

/* Rescan the process for global_States (new VMs); returns how many. A
 * derived build's layout candidates are tried in turn, and the first whose
 * every field checks out in a VM is adopted. */
int lj_target__scan_vms(struct lj_target *t);

/* Adopt the layout under which g is a verified global_State (a caller that
 * knows its VM); 0, or -1 when no candidate layout verifies there. */
int lj_target__adopt_vm(struct lj_target *t, __u64 g);

/* What was read of t's build from the build cache did not verify: drop it
 * there, so that the next use describes the build afresh. */
void lj_target__distrust(struct lj_target *t);

#endif /* NUPP_LJ_TARGET_H */
