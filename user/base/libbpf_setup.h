/* SPDX-License-Identifier: MIT */
/*
 * libbpf_setup.h - what every BPF object of nupp-bpf is opened with.
 *
 * One owner for libbpf's process-wide settings: its log (quiet unless -v;
 * callers report their own failures in one line) and the kernel BTF that
 * CO-RE relocations are resolved against. Parsing the running kernel's
 * full BTF (5 MB, 100,000+ types) costs tens of milliseconds per object;
 * the build keeps the few types the objects use (bpftool gen min_core_btf)
 * with the build-id of the kernel they were taken from, and a kernel with
 * that build-id is given them instead. Any other kernel gets libbpf's
 * default, its own full BTF.
 */
#ifndef NUPP_LIBBPF_SETUP_H
#define NUPP_LIBBPF_SETUP_H

#include <stdbool.h>
#include <bpf/libbpf.h>

/* libbpf's debug output on stderr (-v), or nothing. */
void libbpf_setup__verbose(bool on);

/* Options for a skeleton's __open_opts(): the minimal kernel BTF when it was
 * made for the running kernel. Static storage, set up on first use. */
const struct bpf_object_open_opts *libbpf_setup__open_opts(void);

/* Whether the running kernel is the one the minimal BTF was made from. */
bool libbpf_setup__min_btf_matches(void);

/* Run an object's learn_pid_view program (bpf/pid_view.h) once in this
 * task, so that its programs name processes by the ids of nupp-bpf's own
 * PID namespace; *learned is the object's view_learned. 0, or -1 with err
 * set. */
int libbpf_setup__learn_pid_view(const struct bpf_program *prog, const unsigned *learned,
				 char *err, size_t errsz);

#endif
