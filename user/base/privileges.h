/* SPDX-License-Identifier: MIT */
/* privileges.h - may this process load BPF programs and read others' memory? */
#ifndef NUPP_PRIVILEGES_H
#define NUPP_PRIVILEGES_H

#include <stdbool.h>

/* CAP_BPF with CAP_PERFMON, or CAP_SYS_ADMIN (root has all of them), and a
 * kernel with BTF. false with the reason in *why (a static string). */
bool privileges__bpf(const char **why);

#endif /* NUPP_PRIVILEGES_H */
