/* SPDX-License-Identifier: MIT */
/* places.h - how many target processes a session follows (BPF and userspace). */
#ifndef NUPP_PLACES_H
#define NUPP_PLACES_H

/* Target processes of one session: each process followed takes a place,
 * and one more after each exec; places are not reused. A power of two. */
#define NUPP_MAX_PLACES	1024

#endif /* NUPP_PLACES_H */
