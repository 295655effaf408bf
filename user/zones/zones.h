/* SPDX-License-Identifier: MIT */
/*
 * zones.h - the zone paths of a target process (nupp.profile.zone).
 *
 * The target's zone module keeps, in zone_state.so, the id of the zone path
 * open now and a table of id -> path (user/zones/zone_state.h). This finds that
 * state in the target's memory (the module may be loaded at any time: call
 * zones__refresh periodically), opens its gate by attaching to the USDT
 * probe nupp:zone, and maps ids to paths.
 */
#ifndef NUPP_ZONES_H
#define NUPP_ZONES_H

#include <sys/types.h>
#include <linux/types.h>

struct zones;

struct zones *zones__new(pid_t pid);
void zones__free(struct zones *z);

/* Look for the zone state if not found yet; 1 when it was found now (the
 * gate is then open), 0 otherwise. */
int zones__refresh(struct zones *z);

/* Address of the target's struct nupp_zone_state, 0 when not (yet) found. */
__u64 zones__state_addr(const struct zones *z);

/* Address of the target's current zone id (u32), 0 when not (yet) found. */
__u64 zones__current_addr(const struct zones *z);

/* The path of a zone id ("" for 0 or an id that cannot be read); cached. */
const char *zones__path(struct zones *z, __u32 id);

#endif /* NUPP_ZONES_H */
