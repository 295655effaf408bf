/* SPDX-License-Identifier: MIT */
/*
 * say.h - what nupp-bpf tells on stderr: one line per error or note, and the
 * live status line they must not run into.
 */
#ifndef NUPP_SAY_H
#define NUPP_SAY_H

#include <stdbool.h>

/* One line "nupp-bpf: error: MESSAGE" on stderr: how every error is told. */
void say__error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line "nupp-bpf: MESSAGE" on stderr: what a session tells as it goes. */
void say__note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The live status line: "nupp-bpf: MESSAGE" over the previous one, no
 * newline (a terminal's stderr only); NULL clears it. An error or note
 * that follows starts a line of its own. */
void say__status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say__status_clear(void);

#endif /* NUPP_SAY_H */
