/* SPDX-License-Identifier: MIT */
/* detach.h - the session's probes removed in the background (detach.c). */
#ifndef NUPP_DETACH_H
#define NUPP_DETACH_H

#include <stdbool.h>
#include "sampler/sampler.h"
#include "trace/trace.h"

/* Once everything is written: the sampler's timers stop, the trace
 * collector's probe reports nothing more, and a child takes the probes
 * over. In the parent every descriptor above 2 is closed (nothing of s or
 * t may be used or freed after): true. false when nothing was handed over
 * (no channel, or no pipe or fork), and s and t are the caller's to close. */
bool detach__in_background(struct sampler *s, struct tracer *t);

#endif /* NUPP_DETACH_H */
