// SPDX-License-Identifier: MIT
/* formats.c - output formats of a profile, by name and file name (formats.h). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "flamegraph.h"
#include "formats.h"
#include "util.h"
#include "pprof.h"
#include "speedscope.h"

static const struct {
	const char *name, *ext;
} formats[FORMAT_MAX] = {
	[FORMAT_COLLAPSED] = { "collapsed", ".collapsed" },
	[FORMAT_PPROF] = { "pprof", ".pb.gz" },
	[FORMAT_SPEEDSCOPE] = { "speedscope", ".json" },
	[FORMAT_SVG] = { "svg", ".svg" },
};

int format__parse(const char *name)
{
	for (int f = 0; f < FORMAT_MAX; f++)
		if (!strcmp(name, formats[f].name))
			return f;
	return -1;
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);

	return n > k && !strcmp(s + n - k, tail);
}

enum profile_format format__of_file(const char *path)
{
	for (int f = 0; f < FORMAT_MAX; f++)
		if (f != FORMAT_COLLAPSED && ends_with(path, formats[f].ext))
			return f;
	return FORMAT_COLLAPSED;
}

const char *format__name(enum profile_format f)
{
	return formats[f].name;
}

const char *format__ext(enum profile_format f)
{
	return formats[f].ext;
}

int format__write(const struct profile *p, const struct render_opts *o, enum profile_format f,
		  FILE *out)
{
	switch (f) {
	case FORMAT_PPROF:
		return pprof__write(p, o, out);
	case FORMAT_SPEEDSCOPE:
		return speedscope__write(p, o, out);
	case FORMAT_SVG:
		return flamegraph__write(p, o, out);
	default:
		return profile__write_collapsed(p, o, out, NULL) < 0 ? -1 : 0;
	}
}

/* ---------------------------------------------------------------------------
 * Text for JSON and XML
 */

#define REPLACEMENT	"\xef\xbf\xbd"	/* U+FFFD */

void format__put_json(FILE *out, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;

	fputc('"', out);
	while (*u) {
		int n = utf8_len(u, 4);

		if (!n) {
			fputs(REPLACEMENT, out);
			u++;
		} else if (*u == '"' || *u == '\\') {
			fprintf(out, "\\%c", *u++);
		} else if (*u < 0x20) {
			fprintf(out, "\\u%04x", *u++);
		} else {
			fwrite(u, 1, n, out);
			u += n;
		}
	}
	fputc('"', out);
}

char *format__utf8_dup(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	char *copy = malloc(3 * strlen(s) + 1), *c = copy;	/* a byte grows to 3 at most */

	if (!copy)
		return NULL;
	while (*u) {
		int n = utf8_len(u, 4);

		if (n) {
			memcpy(c, u, n);
			u += n;
			c += n;
		} else {
			memcpy(c, REPLACEMENT, 3);
			u++;
			c += 3;
		}
	}
	*c = '\0';
	return copy;
}
