/* SPDX-License-Identifier: MIT */
/* session.h - one run of nupp-bpf: targets, channels, outputs, summary. */
#ifndef NUPP_SESSION_H
#define NUPP_SESSION_H

#include "options.h"

/* Run a session; returns the process exit status. When it has attached
 * probes, it hands them to a child process at the end and closes every
 * descriptor above 2 (detach.h): call it last. */
int session__run(const struct session_opts *o);

#endif /* NUPP_SESSION_H */
