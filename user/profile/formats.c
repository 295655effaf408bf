// SPDX-License-Identifier: MIT
/* formats.c - output formats of a profile, by name and file name (formats.h). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include "base/output.h"
#include "flamegraph.h"
#include "formats.h"
#include "base/util.h"
#include "pprof.h"
#include "speedscope.h"

static int write_collapsed(const struct profile *p, const struct render_opts *o, FILE *out)
{
	return profile__write_collapsed(p, o, out, NULL) < 0 ? -1 : 0;
}

/* A new format is a writer of its own file and a row here. */
static const struct {
	const char *name, *ext;
	int (*write)(const struct profile *p, const struct render_opts *o, FILE *out);
} formats[FORMAT_MAX] = {
	[FORMAT_COLLAPSED] = { "collapsed", ".collapsed", write_collapsed },
	[FORMAT_PPROF] = { "pprof", ".pb.gz", pprof__write },
	[FORMAT_SPEEDSCOPE] = { "speedscope", ".json", speedscope__write },
	[FORMAT_SVG] = { "svg", ".svg", flamegraph__write },
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

const char *format__ext(enum profile_format f)
{
	return formats[f].ext;
}

int format__write(const struct profile *p, const struct render_opts *o, enum profile_format f,
		  FILE *out)
{
	return formats[f < FORMAT_MAX ? f : FORMAT_COLLAPSED].write(p, o, out);
}

int format__write_output(const struct profile *p, const struct render_opts *o,
			 enum profile_format f, struct output *out, const char *name,
			 char *err, size_t errsz)
{
	if (format__write(p, o, f, out->f)) {
		if (!ferror(out->f)) {
			snprintf(err, errsz, "out of memory while writing %s", name);
			output__discard(out);
			return -1;
		}
		errno = EIO;	/* for commit's message: stdio's errno may be stale */
	}
	return output__commit(out, err, errsz) ? -1 : 0;
}
