/* SPDX-License-Identifier: MIT */
/*
 * formats.h - the formats a profile is written in, and what they share.
 *
 * One aggregated profile (profile.h) feeds every writer: collapsed stacks
 * (profile.c), pprof's gzip'd protobuf (pprof.c), speedscope's JSON
 * (speedscope.c) and the interactive SVG flame graph (flamegraph.c). A
 * file's name picks its format when none is asked for: ".pb.gz" is pprof,
 * ".json" speedscope, ".svg" the flame graph, anything else collapsed
 * stacks, the format nupp-bpf has always written. Their text escaping
 * (JSON and XML must be valid UTF-8, which frame names read from a target
 * need not be) is base/text.h's.
 */
#ifndef NUPP_FORMATS_H
#define NUPP_FORMATS_H

#include <stdio.h>
#include "profile.h"

enum profile_format {
	FORMAT_COLLAPSED,	/* collapsed stacks: one line per stack */
	FORMAT_PPROF,		/* pprof: profile.proto, gzip'd */
	FORMAT_SPEEDSCOPE,	/* speedscope's file format (JSON) */
	FORMAT_SVG,		/* an interactive flame graph */
	FORMAT_MAX,
};

/* The format called name ("pprof"), or -1. */
int format__parse(const char *name);

/* The format a file's name implies, by its extension. */
enum profile_format format__of_file(const char *path);

/* The extension its files get (".pb.gz"). */
const char *format__ext(enum profile_format f);

/* Write p in format f; 0, or -1 on a write error or out of memory. */
int format__write(const struct profile *p, const struct render_opts *o, enum profile_format f,
		  FILE *out);

/* Write p in format f into out, a file opened with output__open (named
 * name in messages), and commit it: the whole file, or none when a writer
 * ran out of memory. 0, or -1 with a one-line reason in err. */
struct output;
int format__write_output(const struct profile *p, const struct render_opts *o,
			 enum profile_format f, struct output *out, const char *name,
			 char *err, size_t errsz);

#endif /* NUPP_FORMATS_H */
