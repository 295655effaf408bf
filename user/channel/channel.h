/* SPDX-License-Identifier: MIT */
/*
 * channel.h - what every profiling channel does for a session: take a
 * target, follow its zones, notice its exec, give up a pid, wake the
 * session when it has events, pause, close.
 *
 * A channel is a struct of its own (the sampler, the trace collector) whose
 * first member is a struct channel (its operations, and how its events
 * wake a session); its constructor (sampler__open,
 * tracer__open) and what it collects (a profile, a trace report) stay its
 * own. A session holds its channels in a channel_set and does each of these
 * steps to all of them, in the order they were added: the CLI's session
 * (session/session.c) and the Lua module's (lua/lua_module.c) alike. A new
 * channel fills in channel_ops and is added where the session opens the
 * others (CONTRIBUTING.md).
 */
#ifndef NUPP_CHANNEL_H
#define NUPP_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct channel;
struct lj_target;
struct zones;

struct channel_ops {
	const char *name;	/* "sampler", "trace": in messages */
	/* Profile t's process (zones z, or NULL); 0, or -1 with why in err. */
	int (*add_target)(struct channel *c, const struct lj_target *t, struct zones *z,
			  char *err, size_t errsz);
	/* t's process is gone or no longer profiled: its pid is taken by no
	 * later event; what it did is kept. */
	void (*remove_target)(struct channel *c, const struct lj_target *t);
	/* Did pid execute another program since it was added? A channel that
	 * says so has stopped taking it (its BPF program saw the exec). */
	bool (*target_execed)(struct channel *c, pid_t pid);
	/* t's process loaded a zone module (z): events carry its zones now. */
	int (*set_zones)(struct channel *c, const struct lj_target *t, struct zones *z);
	/* A descriptor readable when the channel has events to take in, or -1. */
	int (*fd)(const struct channel *c);
	/* Take in what the channel holds now, without waiting: how many
	 * events, or -errno. */
	int (*drain)(struct channel *c);
	/* The session's regular look at its targets (every 100 ms), for a
	 * channel that keeps what it read of each process (the sampler: new
	 * mappings, VMs, zone gates); NULL when it keeps nothing to look at. */
	void (*poll)(struct channel *c);
	/* Stop (true) or resume counting events. */
	void (*pause)(struct channel *c, bool paused);
	void (*close)(struct channel *c);
};

/* How a channel's events wake a session (session/wake.c). */
struct channel_wake {
	/* Its events come in streams (new stacks): after a wake by them the
	 * session pauses, a millisecond at first, longer while they keep
	 * coming, so that a stream costs few wakes and each is named soon. */
	bool streams;
	/* After a wake by it, its descriptor is left out of the waits for
	 * this long; its events are taken in at the end of each wait. */
	int mute_ms;
};

struct channel {
	const struct channel_ops *ops;
	struct channel_wake wake;
};

#define CHANNELS_MAX	4

/* The channels of one session, in the order they were added. */
struct channel_set {
	struct channel *ch[CHANNELS_MAX];
	int n;
};

/* Add c (NULL: nothing); 0, or -1 when the set is full. */
int channels__add(struct channel_set *set, struct channel *c);
/* Remove c from the set without closing it. */
void channels__drop(struct channel_set *set, struct channel *c);

/* Profile t's process (zones z, or NULL) in every channel: 0, or -1 at the
 * first that fails, with why in err. For a session whose channels are all
 * required; the CLI's, whose trace collector may fail alone and leave the
 * sampler running, adds a target channel by channel (session/attach.c). */
int channels__add_target(struct channel_set *set, const struct lj_target *t, struct zones *z,
			 char *err, size_t errsz);
void channels__remove_target(struct channel_set *set, const struct lj_target *t);
void channels__poll(struct channel_set *set);
void channels__set_zones(struct channel_set *set, const struct lj_target *t, struct zones *z);
void channels__pause(struct channel_set *set, bool paused);

/* Did pid execute another program? Every channel saw the same exec in the
 * kernel, so the first one's "no" answers for all; a "yes" is passed on to
 * the others, so that each stops taking the pid. */
bool channels__target_execed(struct channel_set *set, pid_t pid);

/* Close every channel and empty the set. */
void channels__close(struct channel_set *set);

#endif /* NUPP_CHANNEL_H */
