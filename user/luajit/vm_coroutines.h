/* SPDX-License-Identifier: MIT */
/*
 * vm_coroutines.h - the interpreter's own coroutine switches, where --waits
 * probes them: coroutine.yield, coroutine.resume and the function that
 * coroutine.wrap returns, fast functions of the VM's assembly that no build
 * names (vm_coroutines.c says how they are found and checked).
 */
#ifndef NUPP_VM_COROUTINES_H
#define NUPP_VM_COROUTINES_H

#include <linux/types.h>
#include "lj_layout.h"

/* ELF vaddrs of a conditional jump in each fast function, where rbp holds
 * the lua_State of the coroutine that yields or is resumed; 0: not found. */
struct vm_coroutine_sites {
	__u64 yield;
	__u64 resume;
	__u64 wrap;
	char why[200];		/* what was not found, and why: one line */
};

/* Decode the interpreter blob of the LuaJIT in the ELF file at path (a
 * GC64 x86-64 build; lj gives L_cframe) and find the three sites, each
 * matched exactly once. 0 when all three are found, else -1 with why said
 * (the sites found are kept). The last file's answer is kept. */
int vm_coroutines__find(const char *path, const struct lj_layout *lj,
			struct vm_coroutine_sites *out);

#endif /* NUPP_VM_COROUTINES_H */
