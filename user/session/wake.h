/* SPDX-License-Identifier: MIT */
/*
 * wake.h - when a session wakes to take in its channels' events: the one
 * wake policy of the CLI's sessions (session.c) and the Lua module's.
 *
 * A session sleeps until a channel's descriptor says it has events, or
 * until its next poll. New stacks (a channel that streams) are named at
 * once: what names them comes with them but for the call sites of their
 * outer frames, which the process must still hold (the last moments of a
 * short program). After such a wake the session pauses a millisecond; once
 * every wait has met new stacks for STREAM_S, twice as long after each
 * wake, up to WAKE_GAP_MAX_MS: a stream of new stacks (a large program,
 * hundreds a second) costs about 16 wakes a second, each a context switch
 * (dear on a VM), while a short program keeps the 1-ms gap to its end; the
 * first wait at least as long as the gap that meets nothing brings it back
 * to 1 ms (docs/benchmarks.md, bench-large). 64 ms of new stacks fit the
 * sampler's ring (~300 records of 7 KB) below ~4,500 new stacks a second;
 * past that its overflow is found by a scan of its table. A channel that
 * mutes (trace aborts) is left out of the waits for its mute_ms after it
 * woke one; every channel is drained after each wait.
 */
#ifndef NUPP_WAKE_H
#define NUPP_WAKE_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include "channel/channel.h"

#define TICK_MS		10	/* a session's tick: it wakes for events between */
#define POLL_TICKS	10	/* its channels and targets are polled every 100 ms */
#define WAKE_GAP_MAX_MS	64	/* the longest pause after a wake by new stacks */
#define STREAM_S	1.0	/* new stacks in every wait this long: a stream */

struct wake {
	int gap_ms;			/* the pause after the next wake */
	double stream_since;		/* since when every wait met new stacks, 0 none */
	double muted_until[CHANNELS_MAX];	/* a channel's wakes, by monotonic_s() */
	bool young;			/* a process followed may be a short program
					 * near its end: a stream is recognized at
					 * its first wake (session.c, place_young) */
	pthread_mutex_t *lock;		/* held while channels are drained, or NULL */
};

/* Wait up to seconds for the channels of set (stop: a flag that ends the
 * wait when set). While fast(arg) says so (a target's VM is awaited), the
 * wait wakes every millisecond to call it again; fast may be NULL. */
void wake__wait(struct wake *w, struct channel_set *set, double seconds,
		bool (*fast)(void *arg), void *arg, volatile sig_atomic_t *stop);

#endif /* NUPP_WAKE_H */
