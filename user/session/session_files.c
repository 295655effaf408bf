// SPDX-License-Identifier: MIT
/*
 * session_files.c - the files one session writes.
 *
 * record writes each -o FILE in the format its extension names, unless
 * --format says (default nupp-PID.collapsed); trace writes -o FILE (default
 * nupp-PID-aborts.csv); the default job takes -o NAME for NAME.collapsed,
 * NAME.svg and NAME-aborts.csv; --svg FILE adds a flame graph; --rotate
 * writes a file per interval into -o DIR; top writes none. Every file is
 * opened before anything attaches, so that an unwritable one fails first,
 * and is written through a new file renamed at the end (output.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include "base/say.h"
#include "session_files.h"

static void add_profile_out(struct session_files *f, const char *name, enum profile_format fmt)
{
	struct profile_out *po = &f->pouts[f->npouts++];

	snprintf(po->name, sizeof(po->name), "%s", name);
	po->format = fmt;
}

/* The profile's files: record's -o FILEs, else BASE in --format's format
 * (collapsed by default); --svg, or the default job's BASE.svg. */
static void profile_names(struct session_files *f, const struct session_opts *o, const char *base)
{
	enum profile_format fmt = o->format >= 0 ? (enum profile_format)o->format : FORMAT_COLLAPSED;
	char name[4096];

	for (int i = 0; o->command_given && i < o->noutputs; i++)
		add_profile_out(f, o->outputs[i],
				o->format >= 0 ? (enum profile_format)o->format
					       : format__of_file(o->outputs[i]));
	if (!o->command_given || !o->noutputs) {
		snprintf(name, sizeof(name), "%s%s", base, format__ext(fmt));
		add_profile_out(f, name, fmt);
	}
	if (o->svg) {
		add_profile_out(f, o->svg, FORMAT_SVG);
	} else if (!o->command_given && fmt != FORMAT_SVG) {
		snprintf(name, sizeof(name), "%s.svg", base);
		add_profile_out(f, name, FORMAT_SVG);
	}
}

/* --rotate: its files go into -o DIR (default the working directory), in
 * --format's format, pprof unless told. */
static struct rotate *open_rotate(const struct session_opts *o, pid_t pid, const char *title,
				  char *err, size_t errsz)
{
	struct rotate_opts ro = {
		.dir = o->noutputs ? o->outputs[0] : ".",
		.seconds = o->rotate,
		.keep = o->keep,
		.format = o->format >= 0 ? (enum profile_format)o->format : FORMAT_PPROF,
		.render = &o->render,
		.title = title,
		.pid = pid,
	};

	return rotate__open(&ro, err, errsz);
}

int session_files__open(struct session_files *f, const struct session_opts *o, pid_t pid,
			const char *title, bool sampling, bool tracing)
{
	char base[4000], err[PATH_MAX + 128];

	if (o->noutputs)
		snprintf(base, sizeof(base), "%s", o->outputs[0]);
	else
		snprintf(base, sizeof(base), "nupp-%d", pid);
	if (!o->top) {			/* a live view: no files */
		if (tracing)
			snprintf(f->csv_name, sizeof(f->csv_name),
				 o->command_given && o->noutputs ? "%s" : "%s-aborts.csv", base);
		if (sampling && !o->rotate)	/* --rotate names its own (rotate.h) */
			profile_names(f, o, base);
	}
	f->created = true;
	if (output__open(&f->csv, f->csv_name, err, sizeof(err)))
		goto fail;
	for (int i = 0; i < f->npouts; i++)
		if (output__open(&f->pouts[i].out, f->pouts[i].name, err, sizeof(err)))
			goto fail;
	if (o->rotate && !(f->rotate = open_rotate(o, pid, title, err, sizeof(err))))
		goto fail;
	return 0;
fail:
	say__error("%s", err);
	return -1;
}

/* Finish an output; false (and an error line) when it could not be written. */
static bool commit(struct output *o)
{
	char err[PATH_MAX + 128];

	if (output__commit(o, err, sizeof(err))) {
		say__error("%s", err);
		return false;
	}
	return true;
}

/* Write one of the profile's files and finish it; 0, or 1 with an error
 * line. A writer that ran out of memory leaves no half-written file. */
static int write_profile_out(const struct profile *p, const struct render_opts *ro,
			     struct profile_out *po)
{
	char err[PATH_MAX + 128];

	if (!format__write_output(p, ro, po->format, &po->out, po->name, err, sizeof(err)))
		return 0;
	say__error("%s", err);
	return 1;
}

int session_files__write_profile(struct session_files *f, const struct profile *p,
				 const struct render_opts *ro)
{
	int ret = 0;

	for (int i = 0; i < f->npouts; i++)
		ret |= write_profile_out(p, ro, &f->pouts[i]);
	return ret;
}

int session_files__write_csv(struct session_files *f, const struct trace_report *rep)
{
	if (rep && f->csv.f && trace_report__write_csv(rep, f->csv.f))	/* top: no file */
		errno = EIO;
	return commit(&f->csv) ? 0 : 1;
}

void session_files__say_written(const struct session_files *f, const struct session_opts *o,
				bool traced)
{
	for (int i = 0; i < f->npouts; i++)
		if (strcmp(f->pouts[i].name, "-"))
			say__note("wrote %s", f->pouts[i].name);
	if (f->rotate)
		say__note("wrote %u profiles in %s", rotate__written(f->rotate),
			      o->noutputs ? o->outputs[0] : ".");
	if (f->csv_name[0] && strcmp(f->csv_name, "-") && traced)
		say__note("wrote %s", f->csv_name);
}

void session_files__close(struct session_files *f, bool discard)
{
	rotate__close(f->rotate);
	f->rotate = NULL;
	if (discard && f->created) {
		for (int i = 0; i < f->npouts; i++)
			output__discard(&f->pouts[i].out);
		output__discard(&f->csv);
	}
	for (int i = 0; i < f->npouts; i++)
		commit(&f->pouts[i].out);
	commit(&f->csv);
}
