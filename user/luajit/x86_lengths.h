/* SPDX-License-Identifier: MIT */
/*
 * x86_lengths.h - instruction lengths of a run of code read from a process
 * (a trace's head), decoded by the same x86-64 decoder as a build's file
 * (x86_code.c), for readers outside luajit/ that need no more than where
 * each instruction starts.
 */
#ifndef NUPP_X86_LENGTHS_H
#define NUPP_X86_LENGTHS_H

#include <stddef.h>
#include <linux/types.h>

/* The lengths of the instructions at the start of code[0 .. len), at
 * address addr, into lens[0 .. max): the path that falls through each
 * conditional branch, up to and with the first jmp, call or return, or the
 * first byte that does not decode. Their number; -1 when the
 * decoder cannot be loaded. */
int x86_straight_lengths(const __u8 *code, size_t len, __u64 addr, __u8 *lens, int max);

#endif /* NUPP_X86_LENGTHS_H */
