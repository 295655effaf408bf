// SPDX-License-Identifier: MIT
/*
 * main.c - the nupp-bpf command line.
 *
 * Parses the options (argp) into struct session_opts, checks that they go
 * together (a one-line usage error, exit 2, when not), and hands the run to
 * the command asked for: inspect, dump, or a session (session.c) for
 * record, trace, top and the default job of both channels.
 *
 *	nupp-bpf record -p PID [-F HZ | -i MS] [-d SEC] [-o FILE] ...
 *	nupp-bpf record [options] -- CMD ARGS...
 *	nupp-bpf trace  -p PID [--include-benign] [-d SEC] [-o FILE]
 *	nupp-bpf top    -p PID | -- CMD ARGS...	a live view
 *	nupp-bpf -p PID			every channel, each to its default file
 *	nupp-bpf dump -p PID [--json]	the Lua stack of every VM, now
 */
#define _GNU_SOURCE
#include <argp.h>
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "base/say.h"
#include "dump.h"
#include "heap.h"
#include "profile/formats.h"
#include "inspect.h"
#include "base/libbpf_setup.h"
#include "session/session.h"
#include "version.h"
#include "check/check.h"

static const char doc[] =
"nupp-bpf -- profile LuaJIT programs from outside, with eBPF.\n"
"\n"
"Commands:\n"
"  record   sample Lua stacks and VM states (collapsed stacks, pprof,\n"
"           speedscope or an SVG flame graph)\n"
"  trace    collect JIT trace aborts and blacklistings (CSV)\n"
"  top      a live view each second: the hottest functions, VM states and\n"
"           aborts (keys: s self, t total, S and T since the start, q quits)\n"
"  (none)   both, each to its default file\n"
"  inspect FILE | -p PID   how nupp-bpf identifies a LuaJIT build, and where\n"
"           its probes would go (each verified); attaches nothing\n"
"  dump -p PID [--json]   the Lua stack of every VM of the process now, once,\n"
"           with its VM state and each frame's line; blocked threads too\n"
"  heap -p PID [--json] [--pause]   what holds each VM's heap now: objects\n"
"           and bytes by type against collectgarbage(\"count\"), the largest\n"
"           tables, closures by prototype, strings by prefix, bytes by\n"
"           reference path (-o FILE: as a flame graph, pprof inuse_space...)\n"
"  heap --diff SECONDS -p PID | heap --diff OLD.json NEW.json   what grew\n"
"           between two censuses, by type and by reference path\n"
"  check [--luajit PATH] FILE|DIR... | check -p PID   the trace aborts of\n"
"           Lua code found without running it: loaded by that LuaJIT\n"
"           (default: luajit on PATH), or read from a running process, and\n"
"           read against its recorder (CSV, --format text or sarif);\n"
"           exit 1 on a blocker\n"
"\v"
"EXAMPLES (as root):\n"
"  nupp-bpf -p 1234                  # profile and trace a running process\n"
"  nupp-bpf record -p 1234 -d 10     # 10 s of samples to nupp-1234.collapsed\n"
"  nupp-bpf record -F 997 -o - -- luajit app.lua > app.collapsed\n"
"  nupp-bpf record -p 1234 -o app.pb.gz      # pprof: go tool pprof\n"
"  nupp-bpf record -p 1234 -o a.json -o a.svg # speedscope, flame graph\n"
"  nupp-bpf trace -p 1234 -o aborts.csv\n"
"  nupp-bpf dump -p 1234             # where is it stuck?\n"
"  nupp-bpf heap -p 1234             # what holds its memory?\n"
"  nupp-bpf heap --diff 60 -p 1234   # what grows? (a leak hunt)\n"
"  nupp-bpf heap -p 1234 -o heap.svg # its bytes by reference path\n"
"  nupp-bpf top -p 1234 -F 997\n"
"  nupp-bpf check --format text src/  # aborts predicted from bytecode\n"
"  nupp-bpf record -p 1234 --rotate 60 --keep 1440 -o /var/lib/nupp/\n"
"  flamegraph.pl nupp-1234.collapsed > flame.svg\n";

static const char args_doc[] = "[record|trace|top] [-- CMD ARGS...]\ninspect FILE|-p PID\n"
			       "dump -p PID [--json]\nheap -p PID [--json] [--pause] [-o FILE...]\n"
			       "heap --diff SECONDS -p PID [--json] [--pause]\n"
			       "heap --diff OLD.json NEW.json [--json]\ncheck [--luajit PATH] [--format csv|text|sarif] [--profile FILE] FILE|DIR...\n"
			       "check -p PID [--format csv|text|sarif]";

enum {
	OPT_DEPTH = 0x100, OPT_ROOT, OPT_ZONE, OPT_CLOCK, OPT_BENIGN, OPT_THREADS,
	OPT_MAX_STACKS, OPT_SVG, OPT_NO_SUMMARY, OPT_ZONES, OPT_USAGE, OPT_VERSION, OPT_CHILDREN, OPT_FORMAT,
	OPT_LINES, OPT_DUMPSTACK_NAMES, OPT_JSON, OPT_ROTATE, OPT_KEEP, OPT_LUAJIT, OPT_PROFILE,
	OPT_MAX_CPU, OPT_PAUSE, OPT_DIFF, OPT_OFF_CPU, OPT_MIN_BLOCK, OPT_PREEMPTED, OPT_WALL, OPT_WAITS,
	OPT_ALLOC, OPT_ALLOC_MEAN,
};

static const struct argp_option options[] = {
	{ "pid", 'p', "PID", 0, "Profile this process (repeatable)", 0 },
	{ "children", OPT_CHILDREN, NULL, 0, "With -p: also the processes it started and starts, "
	  "and theirs (an OpenResty master's workers); a launched command's always are", 0 },
	{ "frequency", 'F', "HZ", 0, "Samples per second (default 99)", 1 },
	{ "interval", 'i', "MS", 0, "Milliseconds between samples (instead of -F)", 1 },
	{ "clock", OPT_CLOCK, "cpu|thread|tick", 0, "Sampling clock: the scheduler tick, with no "
	  "added interrupt, at -F or at every tick (CONFIG_HZ, usually 250/s) without it; "
	  "cpu-clock events at -F, one per CPU (cpu) or one on each target thread (thread: no "
	  "other task is interrupted, but each switch of a target thread costs a timer restart). "
	  "Default: tick when -F is at most CONFIG_HZ, else cpu", 1 },
	{ "off-cpu", OPT_OFF_CPU, NULL, 0, "Time off the CPU instead of samples: each wait of a "
	  "target thread (blocked in a system call, a lock, a sleep) charged to its Lua stack, "
	  "with the system call and the kernel function it waited in as the leaf; counts are "
	  "microseconds. With -F or -i: sweeps of the threads at that rate instead of a walk "
	  "at each switch (Linux 6.18)", 1 },
	{ "wall", OPT_WALL, NULL, 0, "Wall-clock time: samples on the CPU (as microseconds, "
	  "each its period) and waits off it (as --off-cpu) in one profile, per thread; an "
	  "off-CPU stack ends in its kernel frame", 1 },
	{ "waits", OPT_WAITS, NULL, 0, "With --off-cpu or --wall: also the time a coroutine waits "
	  "from its yield to its resume, from C (OpenResty's cosocket waits, ngx.sleep) or from "
	  "Lua (coroutine.yield: fibers), charged to its stack at the yield, as [coroutine wait]", 1 },
	{ "alloc", OPT_ALLOC, NULL, 0, "Bytes the VMs allocate instead of samples: allocations "
	  "sampled by bytes (one per --alloc-mean on average), each charged to its Lua stack "
	  "for the bytes it stands for; pprof has Go's four heap types (allocated and still in "
	  "use, objects and bytes). Every allocation then traps (a few µs): needs -d", 1 },
	{ "alloc-mean", OPT_ALLOC_MEAN, "SIZE", 0, "With --alloc: bytes between two sampled "
	  "allocations on average (default 512K; K, M, G suffixes)", 1 },
	{ "min-block", OPT_MIN_BLOCK, "US", 0, "With --off-cpu: leave out waits shorter than US "
	  "microseconds (default 0: every wait)", 1 },
	{ "include-preempted", OPT_PREEMPTED, NULL, 0, "With --off-cpu: count the time a thread "
	  "waits for a CPU after preemption too (as [preempted])", 1 },
	{ "depth", OPT_DEPTH, "N", 0, "Frames per stack (default 16, at most 127)", 1 },
	{ "root", OPT_ROOT, "MODULE", 0, "Cut stacks back to their outermost frame from MODULE", 1 },
	{ "zone", OPT_ZONE, "PREFIX", 0, "Keep only samples and aborts under this zone path", 1 },
	{ "threads", OPT_THREADS, NULL, 0, "Start each stack with a [pid/tid vm ADDR] frame "
	  "(pprof: pid, tid and vm labels; speedscope: a profile per thread)", 1 },
	{ "zones", OPT_ZONES, NULL, 0, "Start each stack with a [zone PATH] frame", 1 },
	{ "lines", OPT_LINES, NULL, 0, "Name each Lua frame with its current line "
	  "(app.lua:update:42), interpreted or compiled", 1 },
	{ "dumpstack-names", OPT_DUMPSTACK_NAMES, NULL, 0, "Name C functions by address "
	  "(@0x55d0c0a1b2c0) as LuaJIT's dumpstack does, not by symbol or file+0xADDR", 1 },
	{ "max-stacks", OPT_MAX_STACKS, "N", 0, "Distinct stacks kept in the kernel (default 65536)", 1 },
	{ "include-benign", OPT_BENIGN, NULL, 0, "trace: also count aborts that are normal trace formation", 2 },
	{ "duration", 'd', "SEC", 0, "Stop after SEC seconds (default: until Ctrl-C or exit)", 3 },
	{ "output", 'o', "FILE", 0, "Output file, - for stdout (default nupp-PID.collapsed / "
	  "nupp-PID-aborts.csv); record takes several, each in the format of its extension "
	  "(.pb.gz pprof, .json speedscope, .svg flame graph, else collapsed); the default "
	  "job takes a NAME for NAME.collapsed, NAME.svg and NAME-aborts.csv", 3 },
	{ "format", OPT_FORMAT, "FMT", 0, "collapsed, pprof, speedscope or svg: the format of "
	  "the profile's file (default: by -o's extension; the default job: collapsed)", 3 },
	{ "svg", OPT_SVG, "FILE", 0, "Also write a flame graph (default job: nupp-PID.svg)", 3 },
	{ "rotate", OPT_ROTATE, "SEC", 0, "record: one profile every SEC seconds into -o DIR "
	  "(default .), as DIR/nupp-PID-YYYYMMDDTHHMMSSZ.pb.gz (UTC; --format applies)", 3 },
	{ "keep", OPT_KEEP, "N", 0, "With --rotate: keep the newest N files (default all)", 3 },
	{ "max-cpu", OPT_MAX_CPU, "PCT", 0, "Sample less often while nupp-bpf's own CPU is above "
	  "PCT % of one core (checked every 5 s; counts keep the rate asked)", 3 },
	{ "no-summary", OPT_NO_SUMMARY, NULL, 0, "No summary on stderr at the end", 3 },
	{ "json", OPT_JSON, NULL, 0, "dump, heap: JSON instead of text (schema in the README)", 3 },
	{ "pause", OPT_PAUSE, NULL, 0, "heap: stop the process while its heap is read "
	  "(an exact census; says for how long)", 3 },
	{ "diff", OPT_DIFF, "SECONDS|OLD.json", 0, "heap: what grew, by type and by reference "
	  "path: between two censuses SECONDS apart (-p PID), or of two files of heap --json "
	  "(OLD.json NEW.json); with -o FILE, the growth as a profile too", 3 },
	{ "luajit", OPT_LUAJIT, "PATH", 0, "check: the LuaJIT that will run the code "
	  "(default: luajit on PATH)", 3 },
	{ "profile", OPT_PROFILE, "FILE", 0, "check: order findings by their function's own "
	  "samples in this profile from record (pprof, or collapsed with --lines), hottest "
	  "first; code that never ran is marked", 3 },
	{ "verbose", 'v', NULL, 0, "libbpf debug output", 3 },
	{ "help", 'h', NULL, 0, "Give this help list", -1 },
	{ "usage", OPT_USAGE, NULL, 0, "Give a short usage message", -1 },
	{ "version", OPT_VERSION, NULL, 0, "Print the version and the commit built", -1 },
	{},
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	say__error("%s (see nupp-bpf --help)", msg);
	exit(2);
}

/* A whole number in [lo, hi], or a usage error naming the option. */
static long parse_num(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		usage_error("%s wants a whole number from %ld to %ld, not '%s'", opt, lo, hi, s);
	return v;
}

/* -o, --format and --svg, against the command they go with. */
static void check_outputs(const struct session_opts *o)
{
	int stdout_outs = 0;

	if (!(o->channels & SESSION_SAMPLE) && (o->format >= 0 || o->svg))
		usage_error("--format and --svg are for the profile (record or the default job); "
			    "trace writes CSV");
	if (o->noutputs > 1 && o->channels != SESSION_SAMPLE)
		usage_error("several -o are for record (trace writes one CSV file, the default job "
			    "takes one -o NAME)");
	if (o->noutputs > 1 && o->format >= 0)
		usage_error("--format goes with one -o: with several, each file's extension "
			    "names its format");
	for (int i = 0; i < o->noutputs; i++)
		stdout_outs += !strcmp(o->outputs[i], "-");
	if (stdout_outs > 1)
		usage_error("at most one -o -");
}

/* top and --rotate, against what they go with. */
static void check_live(const struct session_opts *o)
{
	if (o->top && (o->noutputs || o->format >= 0 || o->svg))
		usage_error("top writes no files (-o, --format and --svg are for record)");
	if (o->keep && !o->rotate)
		usage_error("--keep goes with --rotate");
	if (o->rotate && (o->channels != SESSION_SAMPLE || !o->command_given))
		usage_error("--rotate is for record");
	if (o->rotate && (o->noutputs > 1 || o->svg))
		usage_error("--rotate writes its files into one directory: one -o DIR, no --svg");
	if (o->rotate && o->noutputs && !strcmp(o->outputs[0], "-"))
		usage_error("--rotate writes files into a directory, not to stdout");
	if (o->max_cpu && !(o->channels & SESSION_SAMPLE))
		usage_error("--max-cpu lowers the sampling rate: it is for record, top and the "
			    "default job");
	if (o->wall && (o->off_cpu || o->top || o->rotate || o->max_cpu ||
			(o->clock_given && o->sampler.clock != SAMPLER_CLOCK_CPU)))
		usage_error("--wall is for record and the default job, on the cpu clock, without "
			    "--off-cpu (it holds both), --rotate or --max-cpu");
	if ((o->min_block_given || o->sampler.include_preempted || o->sampler.coroutine_waits) &&
	    !o->off_cpu && !o->wall)
		usage_error("--min-block, --include-preempted and --waits go with --off-cpu or --wall");
	if ((o->off_cpu || o->wall) && !(o->channels & SESSION_SAMPLE))
		usage_error("--off-cpu and --wall are for record, top and the default job");
	if (o->off_cpu && (o->clock_given || o->max_cpu))
		usage_error("--off-cpu is its own clock: --clock and --max-cpu are for samples on "
			    "the CPU");
	if (o->off_cpu && o->rate_given && (o->min_block_given || o->sampler.coroutine_waits))
		usage_error("--off-cpu -F samples waits by sweeps, which see no wait begin or end: "
			    "--min-block and --waits need every switch (--off-cpu without -F or -i)");
	if (o->alloc_mean_given && !o->alloc)
		usage_error("--alloc-mean goes with --alloc");
	if (o->alloc && !(o->channels & SESSION_SAMPLE))
		usage_error("--alloc is for record and the default job");
	if (o->alloc && (o->off_cpu || o->wall || o->top || o->max_cpu || o->clock_given ||
			 o->rate_given))
		usage_error("--alloc samples by bytes allocated: no --off-cpu, --wall, top, "
			    "--max-cpu, -F, -i or --clock with it");
	if (o->alloc && !o->duration)
		usage_error("--alloc traps every allocation of the target (a few µs each): give "
			    "it a duration, -d SECONDS");
}

/* The setting an option that takes no value turns on, or NULL. */
static bool *flag_of(struct session_opts *o, int key)
{
	switch (key) {
	case OPT_THREADS:		return &o->render.threads;
	case OPT_ZONES:			return &o->render.zones;
	case OPT_CHILDREN:		return &o->children;
	case OPT_LINES:			return &o->sampler.lines;
	case OPT_DUMPSTACK_NAMES:	return &o->sampler.dumpstack_names;
	case OPT_BENIGN:		return &o->include_benign;
	case OPT_JSON:			return &o->json;
	case OPT_PAUSE:			return &o->pause;
	case OPT_PREEMPTED:		return &o->sampler.include_preempted;
	case OPT_WALL:			return &o->wall;
	case OPT_WAITS:			return &o->sampler.coroutine_waits;
	default:			return NULL;
	}
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct session_opts *o = state->input;
	bool *flag = flag_of(o, key);

	if (flag) {
		*flag = true;
		return 0;
	}
	switch (key) {
	case 'p':
		if (o->npids == SESSION_MAX_PIDS)
			usage_error("at most %d -p options", SESSION_MAX_PIDS);
		o->pids[o->npids++] = parse_num("-p", arg, 1, INT_MAX);
		break;
	case 'F':
		o->sampler.freq_hz = parse_num("-F", arg, 1, 100000);
		o->sampler.period_us = 0;
		o->rate_given = true;
		break;
	case 'i':
		o->sampler.period_us = parse_num("-i", arg, 1, 60000) * 1000;
		o->sampler.freq_hz = 0;
		o->rate_given = true;
		break;
	case OPT_CLOCK:
		o->clock_given = true;
		if (!strcmp(arg, "cpu"))
			o->sampler.clock = SAMPLER_CLOCK_CPU;
		else if (!strcmp(arg, "thread"))
			o->sampler.clock = SAMPLER_CLOCK_THREAD;
		else if (!strcmp(arg, "tick"))
			o->sampler.clock = SAMPLER_CLOCK_TICK;
		else
			usage_error("--clock is cpu, thread or tick, not '%s'", arg);
		break;
	case OPT_DEPTH:
		o->sampler.depth = parse_num("--depth", arg, 1, NUPP_MAX_SHOWN);
		break;
	case OPT_OFF_CPU:
		o->off_cpu = true;
		break;
	case OPT_ALLOC:
		o->alloc = true;
		break;
	case OPT_ALLOC_MEAN: {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(arg, &end, 10);
		if (*end && !end[1] && strchr("kKmMgG", *end)) {
			int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : 30;

			v = v > (1ULL << 30) >> shift ? 0 : v << shift;
		} else if (*end) {
			v = 0;
		}
		if (errno || end == arg || *arg == '-' || v < 1 || v > (1ULL << 30))
			usage_error("--alloc-mean wants a size from 1 to 1G (bytes; K, M or G), "
				    "not '%s'", arg);
		o->sampler.alloc_mean = v;
		o->alloc_mean_given = true;
		break;
	}
	case OPT_MIN_BLOCK:
		o->sampler.min_block_us = parse_num("--min-block", arg, 0, 3600L * 1000000);
		o->min_block_given = true;
		break;
	case OPT_ROOT:
		o->render.root = arg;
		break;
	case OPT_ZONE:
		o->render.zone = arg;
		break;
	case OPT_MAX_STACKS:
		o->sampler.max_stacks = parse_num("--max-stacks", arg, 16, 1 << 22);
		break;
	case 'd':
		o->duration = parse_num("-d", arg, 1, 100L * 365 * 86400);
		break;
	case 'o':
		if (o->noutputs == SESSION_MAX_OUTPUTS)
			usage_error("at most %d -o options", SESSION_MAX_OUTPUTS);
		o->outputs[o->noutputs++] = arg;
		break;
	case OPT_FORMAT:
		if (!strcmp(arg, "csv") || !strcmp(arg, "text") || !strcmp(arg, "sarif")) {
			o->check_format = arg;	/* check's: the command decides at the end */
			break;
		}
		o->format = format__parse(arg);
		if (o->format < 0)
			usage_error("--format is collapsed, pprof, speedscope or svg (check: csv, "
				    "text or sarif), not '%s'", arg);
		break;
	case OPT_SVG:
		o->svg = arg;
		break;
	case OPT_ROTATE:
		o->rotate = parse_num("--rotate", arg, 1, 365L * 86400);
		break;
	case OPT_DIFF:
		/* SECONDS, or the first of two census files */
		if (arg[strspn(arg, "0123456789")] == '\0')
			o->diff_s = parse_num("--diff", arg, 1, 365L * 86400);
		else
			o->diff_files[0] = arg;
		break;
	case OPT_KEEP:
		o->keep = parse_num("--keep", arg, 1, 1000000);
		break;
	case OPT_MAX_CPU: {
		char *end;

		errno = 0;
		o->max_cpu = strtod(arg, &end);
		if (errno || end == arg || *end || !(o->max_cpu > 0 && o->max_cpu <= 100))
			usage_error("--max-cpu wants a percentage of one core, above 0 and at most "
				    "100, not '%s'", arg);
		break;
	}
	case OPT_LUAJIT:
		o->luajit = arg;
		break;
	case OPT_PROFILE:
		o->profile = arg;
		break;
	case OPT_NO_SUMMARY:
		o->summary = false;
		break;
	case 'v':
		libbpf_setup__verbose(true);
		break;
	case 'h':
		argp_help(state->root_argp, stdout, ARGP_HELP_STD_HELP & ~ARGP_HELP_EXIT_OK, "nupp-bpf");
		exit(0);
	case OPT_USAGE:
		argp_help(state->root_argp, stdout, ARGP_HELP_USAGE, "nupp-bpf");
		exit(0);
	case OPT_VERSION:
		printf("nupp-bpf %s\n", NUPP_VERSION);
		exit(0);
	case ARGP_KEY_ERROR:
		o->bad_arg = state->next > 0 && state->next <= state->argc ?
			     state->argv[state->next - 1] : NULL;
		break;
	case ARGP_KEY_ARG:
		/* Before "--": one command word. After it: the program to launch. */
		if (!o->dashdash || state->next - 1 < o->dashdash) {
			if (o->check) {
				if (!o->check_paths)
					o->check_paths = calloc(state->argc, sizeof(char *));
				if (!o->check_paths)
					usage_error("out of memory");
				o->check_paths[o->ncheck_paths++] = arg;
				break;
			}
			if (o->inspect && !o->inspect_file) {
				o->inspect_file = arg;
				break;
			}
			if (o->heap && o->diff_files[0] && !o->diff_files[1]) {
				o->diff_files[1] = arg;
				break;
			}
			if (o->command_given)
				usage_error("unexpected '%s' (a program to launch goes after --)", arg);
			if (!strcmp(arg, "record"))
				o->channels = SESSION_SAMPLE;
			else if (!strcmp(arg, "trace"))
				o->channels = SESSION_TRACE;
			else if (!strcmp(arg, "inspect"))
				o->inspect = true;
			else if (!strcmp(arg, "dump"))
				o->dump = true;
			else if (!strcmp(arg, "heap"))
				o->heap = true;
			else if (!strcmp(arg, "check"))
				o->check = true;
			else if (!strcmp(arg, "top"))
				o->top = true, o->summary = false;	/* the screen says it */
			else
				usage_error("unknown command '%s' (record, trace, top, inspect, dump, heap or "
					    "check; "
					    "a program to launch goes after --)", arg);
			o->command_given = true;
			break;
		}
		o->argv = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (o->check) {
			if (!o->ncheck_paths == !o->npids || o->npids > 1 || o->argv)
				usage_error("check takes FILEs and DIRs, or one -p PID");
			if (o->noutputs > 1 || o->svg || o->format >= 0 || o->children || o->duration)
				usage_error("check writes one -o FILE, in --format csv, text or sarif");
			if (o->npids && o->luajit)
				usage_error("check -p reads the process's own LuaJIT: no --luajit");
			break;
		}
		if (o->check_format)
			usage_error("--format %s is check's", o->check_format);
		if (o->luajit || o->profile)
			usage_error("%s is check's", o->luajit ? "--luajit" : "--profile");
		if (o->inspect && (!o->inspect_file == !o->npids || o->npids > 1 || o->argv))
			usage_error("inspect takes one FILE or one -p PID");
		if (o->inspect)
			break;
		if (o->dump && (o->npids != 1 || o->argv))
			usage_error("dump takes one -p PID");
		if (o->dump && (o->noutputs || o->svg || o->format >= 0 || o->children || o->duration))
			usage_error("dump writes to stdout, once: it takes -p PID and --json");
		if ((o->diff_s || o->diff_files[0]) && !o->heap)
			usage_error("--diff is for heap");
		if (o->heap && o->diff_files[0] && (!o->diff_files[1] || o->npids || o->argv || o->pause))
			usage_error("heap --diff OLD.json NEW.json takes two census files of heap --json "
				    "(and --json), or --diff SECONDS -p PID");
		if (o->heap && !o->diff_files[0] && (o->npids != 1 || o->argv))
			usage_error("heap takes one -p PID");
		if (o->heap && (o->svg || o->format >= 0 || o->children || o->duration))
			usage_error("heap takes -p PID, --json, --pause, --diff and -o FILE (each "
				    "file's extension names its format)");
		if (o->heap && (o->diff_s || o->diff_files[0]))
			for (int i = 0; i < o->noutputs; i++)
				if (!strcmp(o->outputs[i], "-"))
					usage_error("heap --diff writes its report to stdout: its -o "
						    "files go elsewhere");
		for (int i = 0; o->heap && i < o->noutputs; i++)
			if (!strcmp(o->outputs[i], "-") && (o->json || o->noutputs > 1))
				usage_error("heap -o - writes that file to stdout: no --json, one -o");
		if (o->json && !o->dump && !o->heap)
			usage_error("--json is for dump and heap");
		if (o->pause && !o->heap)
			usage_error("--pause is for heap");
		if (o->dump || o->heap)
			break;
		if (!o->npids && !o->argv)
			usage_error("nothing to profile: give -p PID or -- CMD ARGS");
		if (o->npids && o->argv)
			usage_error("-p and a command to launch exclude each other");
		if (o->children && !o->npids)
			usage_error("--children goes with -p (a launched command's children are "
				    "always profiled)");
		check_live(o);
		check_outputs(o);
		/* --clock tick alone takes every tick; with -F or -i, as many as asked. */
		if (o->sampler.clock == SAMPLER_CLOCK_TICK && !o->rate_given)
			o->sampler.freq_hz = o->sampler.period_us = 0;
		/* --wall weighs a sample as the cpu clock's period. */
		if (o->wall && !o->clock_given)
			o->sampler.clock = SAMPLER_CLOCK_CPU;
		/* --off-cpu alone sees every switch; with -F or -i it sweeps. */
		if (o->off_cpu && !o->rate_given)
			o->sampler.freq_hz = o->sampler.period_us = 0;
		if (o->off_cpu)
			o->sampler.clock = SAMPLER_CLOCK_OFF_CPU;
		if (o->alloc)
			o->sampler.clock = SAMPLER_CLOCK_ALLOC;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

#define MMAP_THRESHOLD	(32 << 20)	/* glibc's largest: smaller blocks come from the heap */
#define HEAP_BYTES	(30 << 20)	/* the heap, grown at once */
#define HUGE_PAGE	(2UL << 20)

/* Fresh memory is dear on a virtual machine that shadows the guest's page
 * tables: the first touch of each 4 KiB page costs ~10 us there, and a huge
 * page is touched once for 512 of them. Loading the sampler has libbpf read
 * the kernel's BTF (megabytes) into fresh memory and copy it into more (a
 * large part of a dump's CPU time), and a large program's profile grows by
 * tens of MB of tables and names. So the heap is grown once, asked to be
 * backed by huge pages, and kept: allocations below HEAP_BYTES come from
 * it, those of every thread (one arena: the BPF object is loaded, and the
 * BTF read, on a thread of its own). Where huge pages are off, nothing is
 * lost. Here, not in the Lua module: a script's own process keeps its heap
 * as it is. */
static void heap_in_huge_pages(void)
{
	unsigned long lo, hi;
	char *p;

	if (!mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) || !mallopt(M_TRIM_THRESHOLD, 2 * HEAP_BYTES) ||
	    !mallopt(M_ARENA_MAX, 1))
		return;
	p = malloc(HEAP_BYTES);
	if (!p)
		return;
	lo = ((unsigned long)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	hi = ((unsigned long)p + HEAP_BYTES) & ~(HUGE_PAGE - 1);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
	free(p);
}

int main(int argc, char **argv)
{
	struct session_opts o = {
		.channels = SESSION_SAMPLE | SESSION_TRACE,
		.sampler = SAMPLER_OPTS_DEFAULT,
		.summary = true,
		.format = -1,
	};
	const struct argp argp = { options, parse_opt, args_doc, doc, NULL, NULL, NULL };
	int ret;

	for (int i = 1; i < argc && !o.dashdash; i++)
		if (!strcmp(argv[i], "--"))
			o.dashdash = i;
	/* argp's own messages for unknown options and missing values are two
	 * lines and exit 64; say it in our one-line form instead (which makes
	 * us handle --help too: ARGP_NO_ERRS keeps argp from printing). */
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER | ARGP_NO_ERRS | ARGP_NO_HELP, NULL, &o))
		usage_error("unknown option, or an option without its value: '%s'",
			    o.bad_arg ? o.bad_arg : "?");
	heap_in_huge_pages();
	if (o.inspect)
		return inspect__run(o.inspect_file, o.npids ? o.pids[0] : 0);
	if (o.dump)
		return dump__run(o.pids[0], o.json);
	if (o.heap)
		return heap__run(&(struct heap_opts){ .pid = o.npids ? o.pids[0] : 0, .json = o.json,
					       .pause = o.pause, .diff_s = o.diff_s,
					       .old = o.diff_files[0], .new = o.diff_files[1],
					       .outputs = o.outputs, .noutputs = o.noutputs });
	if (o.check) {
		struct check_opts c = {
			.luajit = o.luajit, .pid = o.npids ? o.pids[0] : 0,
			.paths = o.check_paths, .npaths = o.ncheck_paths,
			.format = !o.check_format || !strcmp(o.check_format, "csv") ? CHECK_CSV :
				  !strcmp(o.check_format, "text") ? CHECK_TEXT : CHECK_SARIF,
			.output = o.noutputs ? o.outputs[0] : NULL, .profile = o.profile,
		};

		return check__run(&c);
	}
	ret = session__run(&o);
	/* Everything is written; the libraries' exit handlers would only
	 * spend the session's last milliseconds. */
	fflush(NULL);
	_exit(ret);
}
