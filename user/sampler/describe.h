/* SPDX-License-Identifier: MIT */
/*
 * describe.h - what the BPF sampler is told of a build (struct nupp_proc):
 * its layout, where the sampler reads the VM's and a thread's fields in one
 * block each, and the call-site kind of each opcode. Of the build alone, so
 * that the replay test (tests/unit/test_replay.c) describes a captured
 * process as the sampler would, whatever struct nupp_proc has become since
 * the capture; sampler__describe adds the process's own (its interpreter,
 * the files' code near it, its VM).
 */
#ifndef NUPP_DESCRIBE_H
#define NUPP_DESCRIBE_H

#include "luajit/symbolize.h"
#include "sampler_abi.h"

/* proc, zeroed, with layout lj and sym's build's opcodes; 0, or -1 when the
 * layout's fields lie wider apart than the sampler reads at once. */
int describe__layout(const struct lj_layout *lj, const struct symbolizer *sym,
		     struct nupp_proc *proc);

#endif /* NUPP_DESCRIBE_H */
