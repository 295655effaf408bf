// SPDX-License-Identifier: MIT
/* say.c - errors, notes and the live status line on stderr (say.h). */
#include <stdarg.h>
#include <stdio.h>
#include "say.h"

static bool status_shown;	/* the live status line is on the terminal */

static void say(const char *prefix, const char *fmt, va_list ap)
{
	if (status_shown)		/* a line of its own, not after the status */
		fputs("\r\033[K", stderr);
	status_shown = false;
	fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void say__error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("nupp-bpf: error: ", fmt, ap);
	va_end(ap);
}

void say__note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("nupp-bpf: ", fmt, ap);
	va_end(ap);
}

void say__status(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("\r\033[Knupp-bpf: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	status_shown = true;
}

void say__status_clear(void)
{
	fputs("\r\033[K", stderr);
	status_shown = false;
}
