/* SPDX-License-Identifier: MIT */
/* inspect.h - `nupp-bpf inspect`: a build as nupp-bpf identifies it. */
#ifndef NUPP_INSPECT_H
#define NUPP_INSPECT_H

#include <sys/types.h>

/* Print what nupp-bpf knows of the LuaJIT in file (or, file NULL, in process
 * pid) to stdout; the exit status: 0, or 1 after a one-line error. */
int inspect__run(const char *file, pid_t pid);

#endif /* NUPP_INSPECT_H */
