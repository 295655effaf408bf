/* SPDX-License-Identifier: MIT */
/* dump.h - `nupp-bpf dump -p PID`: the Lua stack of every VM of a process, now. */
#ifndef NUPP_DUMP_H
#define NUPP_DUMP_H

#include <stdbool.h>
#include <sys/types.h>

/* Print the Lua stack of every LuaJIT VM of process pid, once, to stdout (as
 * JSON when json); the exit status: 0, or 1 after a one-line error. */
int dump__run(pid_t pid, bool json);

#endif /* NUPP_DUMP_H */
