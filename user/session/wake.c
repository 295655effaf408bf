// SPDX-License-Identifier: MIT
/* wake.c - when a session wakes to take in its channels' events (wake.h). */
#include <poll.h>
#include <unistd.h>
#include "base/util.h"
#include "wake.h"

enum { WOKE_STREAM = 1, WOKE_OTHER = 2 };

/* How long channel i may not wake a wait yet, in ms. */
static int muted_ms(const struct wake *w, int i, double now)
{
	double left = w->muted_until[i] - now;

	return left > 0 ? (int)(left * 1e3) + 1 : 0;
}

/* Take in what the streaming channels hold: whether they had anything. */
static bool drain_streams(struct wake *w, struct channel_set *set)
{
	bool took = false;

	if (w->lock)
		pthread_mutex_lock(w->lock);
	for (int i = 0; i < set->n; i++)
		if (set->ch[i]->wake.streams && set->ch[i]->ops->drain(set->ch[i]) > 0)
			took = true;
	if (w->lock)
		pthread_mutex_unlock(w->lock);
	return took;
}

static void drain_others(struct wake *w, struct channel_set *set)
{
	if (w->lock)
		pthread_mutex_lock(w->lock);
	for (int i = 0; i < set->n; i++)
		if (!set->ch[i]->wake.streams)
			set->ch[i]->ops->drain(set->ch[i]);
	if (w->lock)
		pthread_mutex_unlock(w->lock);
}

/* Sleep up to ms, or until a channel not muted has events: what woke it
 * (WOKE_*), the new stacks taken in. After the gap that follows a wake,
 * new stacks are most often there already: the ring (shared memory) is
 * read before the kernel is asked. */
static int wait_once(struct wake *w, struct channel_set *set, int ms, bool after_gap)
{
	struct pollfd pfd[CHANNELS_MAX];
	double now = monotonic_s();
	int woke = 0;

	if (after_gap && drain_streams(w, set))
		return WOKE_STREAM;
	for (int i = 0; i < set->n; i++)
		pfd[i] = (struct pollfd){
			.fd = muted_ms(w, i, now) ? -1 : set->ch[i]->ops->fd(set->ch[i]),
			.events = POLLIN,
		};
	if (poll(pfd, set->n, ms) > 0)
		for (int i = 0; i < set->n; i++)
			if ((pfd[i].revents & POLLIN) && !set->ch[i]->wake.streams) {
				woke |= WOKE_OTHER;
				w->muted_until[i] = monotonic_s() + set->ch[i]->wake.mute_ms / 1e3;
			}
	if (drain_streams(w, set))
		woke |= WOKE_STREAM;
	return woke;
}

static bool any_streams(const struct channel_set *set)
{
	for (int i = 0; i < set->n; i++)
		if (set->ch[i]->wake.streams)
			return true;
	return false;
}

void wake__wait(struct wake *w, struct channel_set *set, double seconds,
		bool (*fast)(void *arg), void *arg, volatile sig_atomic_t *stop)
{
	double end = monotonic_s() + seconds;
	bool after_gap = false;

	for (int left; !(stop && *stop) && (left = (int)((end - monotonic_s()) * 1e3 + 0.5)) > 0;) {
		int step = fast && fast(arg) ? 1 : left, woke;
		double now = monotonic_s();

		for (int i = 0; i < set->n; i++) {
			int muted = muted_ms(w, i, now);

			if (muted && step > muted)
				step = muted;
		}
		woke = wait_once(w, set, step, after_gap);
		after_gap = false;
		if (woke & WOKE_STREAM) {
			int gap = w->gap_ms > 1 ? w->gap_ms : 1;

			usleep(gap * 1000);
			after_gap = true;
			if (!w->stream_since)
				w->stream_since = monotonic_s() - (w->young ? 0 : STREAM_S);
			else if (monotonic_s() - w->stream_since >= STREAM_S)
				w->gap_ms = gap * 2 < WAKE_GAP_MAX_MS ? gap * 2 : WAKE_GAP_MAX_MS;
		} else if (!woke && any_streams(set) && step >= w->gap_ms) {
			/* A wait as long as the gap met nothing (a tick's last
			 * few ms may well meet nothing in the thick of a stream). */
			w->gap_ms = 1;
			w->stream_since = 0;
		}
		drain_others(w, set);
	}
}
