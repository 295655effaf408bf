/* SPDX-License-Identifier: MIT */
/* session_files.h - the files one session writes: named from -o, --format
 * and --svg, all opened before anything attaches (an unwritable one fails
 * first), written at the end, or dropped when nothing was recorded. */
#ifndef NUPP_SESSION_FILES_H
#define NUPP_SESSION_FILES_H

#include <stdbool.h>
#include "profile/formats.h"
#include "base/output.h"
#include "rotate.h"
#include "options.h"
#include "trace/trace.h"

struct session_files {
	struct profile_out {		/* the profile's files */
		struct output out;	/* written through a new file (output.h) */
		enum profile_format format;
		char name[4096];
	} pouts[SESSION_MAX_OUTPUTS + 1];
	int npouts;
	struct output csv;		/* the trace aborts' */
	char csv_name[4096];
	struct rotate *rotate;		/* --rotate's files, NULL without */
	bool created;			/* files were created */
};

/* Name and open every file of the session o, whose first process is pid
 * (default names), with the channels it runs; title is read at each
 * rotated file. 0, or -1 with the error said. */
int session_files__open(struct session_files *f, const struct session_opts *o, pid_t pid,
			const char *title, bool sampling, bool tracing);

/* The profile p in each of its files, each finished. 0, or 1 with an
 * error said per file that could not be written. */
int session_files__write_profile(struct session_files *f, const struct profile *p,
				 const struct render_opts *ro);

/* The trace aborts' CSV (rep NULL: an empty file, nothing was collected),
 * finished. 0, or 1 with the error said. */
int session_files__write_csv(struct session_files *f, const struct trace_report *rep);

/* Say which files were written ("wrote NAME"; traced: the CSV was). */
void session_files__say_written(const struct session_files *f, const struct session_opts *o,
				bool traced);

/* At the end: each file not yet finished is, or, with discard, every file
 * is dropped and what was there before stays. */
void session_files__close(struct session_files *f, bool discard);

#endif /* NUPP_SESSION_FILES_H */
