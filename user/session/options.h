/* SPDX-License-Identifier: MIT */
/*
 * options.h - what a command line asks of a session: its commands, targets,
 * channels and outputs. main.c parses it; the session and its files read it.
 */
#ifndef NUPP_OPTIONS_H
#define NUPP_OPTIONS_H

#include <stdbool.h>
#include <sys/types.h>
#include "profile/profile.h"
#include "sampler/sampler.h"

#define SESSION_MAX_PIDS 64
#define SESSION_MAX_OUTPUTS 8	/* -o files of one record */

enum session_channel {
	SESSION_SAMPLE = 1,	/* the sampler */
	SESSION_TRACE = 2,	/* the trace-abort collector */
};

struct session_opts {
	int channels;			/* enum session_channel bits */
	bool command_given;		/* record or trace was named */
	pid_t pids[SESSION_MAX_PIDS];	/* -p */
	int npids;
	bool children;			/* --children: the -p processes' children too */
	char **argv;			/* command to launch, NULL-terminated */
	int dashdash;			/* argv index of "--", 0 when absent */
	struct sampler_opts sampler;
	struct render_opts render;
	bool include_benign;
	long duration;			/* seconds, 0 = until interrupted or exited */
	const char *outputs[SESSION_MAX_OUTPUTS];	/* -o: record's files, each in the
							 * format of its extension; the
							 * default job's base NAME; trace's CSV */
	int noutputs;			/* 0: the default names */
	int format;			/* --format (enum profile_format), -1: not given */
	const char *svg;		/* --svg, NULL for none (default job: a default name) */
	bool summary;			/* summary on stderr at the end */
	bool top;			/* the top command: a live view, no files */
	unsigned rotate;		/* record --rotate: seconds per file, 0: one file */
	unsigned keep;			/* --keep: rotated files kept, 0: all */
	double max_cpu;			/* --max-cpu: % of one core, 0: no ceiling */
	bool off_cpu;			/* --off-cpu: the sampler's clock is the scheduler's
					 * switches (sampler.clock, once parsed) */
	bool min_block_given, clock_given, rate_given;	/* for the checks of --off-cpu */
	bool wall;			/* --wall: a sampler on the CPU and one off it,
					 * their profiles made one */
	bool alloc;			/* --alloc: the sampler's clock is the VMs'
					 * allocators (sampler.clock, once parsed) */
	bool alloc_mean_given;
	const char *bad_arg;		/* the argument argp stopped at, for its error */
	bool inspect;			/* the inspect command */
	const char *inspect_file;	/* its FILE, NULL with -p */
	bool dump;			/* the dump command */
	bool heap;			/* the heap command */
	bool pause;			/* heap --pause */
	long diff_s;			/* heap --diff SECONDS: censuses that far apart */
	const char *diff_files[2];	/* heap --diff OLD.json NEW.json */
	bool json;			/* dump --json */
	bool check;			/* the check command */
	const char *check_format;	/* check --format: csv, text or sarif; NULL csv */
	const char *luajit;		/* check --luajit */
	const char *profile;		/* check --profile */
	char **check_paths;		/* check's FILEs and DIRs */
	int ncheck_paths;
};

#endif /* NUPP_OPTIONS_H */
