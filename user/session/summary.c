// SPDX-License-Identifier: MIT
/*
 * summary.c - the end-of-session summary on stderr.
 *
 * Samples: how many, over how long, the VM-state split, then every sample
 * that is not a Lua stack, told apart: outside Lua (no function on the
 * thread's Lua stack, no VM yet, a thread in no VM, the VM closed: the
 * program's own code, not a failure) or unresolved, by reason; frames that
 * could not be read; stacks cut at --depth; compiled samples mapped through
 * their trace. Then the first five collapsed stacks. Trace aborts: totals, and the sites that
 * blacklist or block the JIT, each with the catalog's explanation.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "summary.h"
#include "trace_reasons.h"

/* Samples counted under err were taken outside Lua, not failures. */
static bool outside_lua(int err)
{
	return err == NUPP_ERR_NO_FRAME || err == NUPP_ERR_VM_CLOSED;
}

/* An allocation profile's first lines: its estimates, and how made. */
static void alloc_counts(const struct profile *p, const struct render_opts *ro,
			 const struct sampler_stats *st, double seconds, __u64 total, long stacks)
{
	const struct profile_row *r;
	__u64 objects = 0, inuse = 0, inuse_objects = 0;

	for (size_t i = 0; (r = profile__next_kept(p, ro, &i));) {
		objects += r->alloc.objects;
		inuse += r->alloc.inuse_bytes;
		inuse_objects += r->alloc.inuse_objects;
	}
	fprintf(stderr, "nupp-bpf: %.1f s, %.1f MiB allocated in %llu blocks, %.1f MiB of them "
		"in %llu blocks still in use, %ld stacks\n", seconds, total / 1048576.0,
		(unsigned long long)objects, inuse / 1048576.0, (unsigned long long)inuse_objects,
		stacks);
	fprintf(stderr, "  estimates from one allocation sampled per %.0f KiB allocated on "
		"average (%llu sampled blocks still in use)\n", p->period_ns / 1024.0,
		(unsigned long long)st->alloc_live);
	if (st->alloc_untracked)
		fprintf(stderr, "  %llu sampled blocks could not be followed to their free (the "
			"table was full): left out of what is in use\n",
			(unsigned long long)st->alloc_untracked);
}

static void sample_counts(const struct profile *p, const struct render_opts *ro,
			  const struct sampler_stats *st, double seconds, unsigned depth, long stacks)
{
	static const char *const names[NUPP_ST_MAX] = {
		"compiled", "interpreted", "C", "GC", "compiling",
	};
	__u64 state[NUPP_ST_MAX], total = 0, bad = 0, outside;
	bool off_cpu = p->measure == PROFILE_OFF_CPU, alloc = p->measure == PROFILE_ALLOC;
	const char *unit = off_cpu ? "µs" : alloc ? "bytes" : "samples";
	__u64 div = off_cpu ? 1000 : 1;

	profile__totals(p, ro, state);
	for (int i = 0; i < NUPP_ST_MAX; i++)
		total += state[i];
	/* A coroutine waits while its thread runs others or waits itself:
	 * its time is said apart, not added to the threads'. */
	if (off_cpu && st->co_waits) {
		__u64 co_us = (st->co_ns + 500) / 1000;	/* rows round each their own sum */

		fprintf(stderr, "nupp-bpf: %.1f s, %.3f s off the CPU in %llu waits, %.3f s in "
			"%llu coroutine waits, %ld stacks\n", seconds,
			(total > co_us ? total - co_us : 0) / 1e6,
			(unsigned long long)(st->waits - st->co_waits), co_us / 1e6,
			(unsigned long long)st->co_waits, stacks);
	} else if (off_cpu)
		fprintf(stderr, "nupp-bpf: %.1f s, %.3f s off the CPU in %llu waits, %ld stacks\n",
			seconds, total / 1e6, (unsigned long long)st->waits, stacks);
	else if (alloc)
		alloc_counts(p, ro, st, seconds, total, stacks);
	else
		fprintf(stderr, "nupp-bpf: %.1f s, %llu samples, %ld stacks\n", seconds,
			(unsigned long long)total, stacks);
	if (off_cpu && st->switch_every > 1)
		fprintf(stderr, "  target threads switched so often that one switch in up to %u was "
			"walked, its wait counting for as many (an estimate)\n", st->switch_every);
	if (st->weight > 1)
		fprintf(stderr, "  --max-cpu: sampled at 1/%u of the rate asked at the end; each "
			"sample since counted for %u, so counts are samples at the rate asked\n",
			st->weight, st->weight);
	if (total) {
		fputs("  VM states:", stderr);
		for (int i = 0; i < NUPP_ST_MAX; i++)
			fprintf(stderr, " %s %.1f%%", names[i], 100.0 * state[i] / total);
		fputc('\n', stderr);
	}
	/* A thread with no function on its Lua stack runs the program's own
	 * code (an nginx worker between requests), and one of a process with
	 * no VM yet, or with its VM closed, its start-up or its end: not
	 * failures to resolve. Off the CPU, the stats count nanoseconds:
	 * said in microseconds. */
#define N(x)	((unsigned long long)((x) / div))
	outside = st->unresolved[NUPP_ERR_NO_FRAME] + st->before_vm + st->thread_no_vm +
		  st->unresolved[NUPP_ERR_VM_CLOSED];
	if (outside)
		fprintf(stderr, "  outside Lua: %llu of %llu %s (no function on the thread's "
			"Lua stack: the program's own code; %llu before the process had a VM, "
			"%llu on threads in no VM, %llu after it closed it)\n",
			N(outside), N(st->samples - st->paused), unit, N(st->before_vm),
			N(st->thread_no_vm), N(st->unresolved[NUPP_ERR_VM_CLOSED]));
	for (int i = 0; i < NUPP_ERR_MAX; i++)
		bad += outside_lua(i) ? 0 : st->unresolved[i];
	if (bad || st->unsymbolized) {
		fprintf(stderr, "  unresolved: %llu of %llu %s (", N(bad + st->unsymbolized),
			N(st->samples - st->paused), unit);
		for (int i = 0; i < NUPP_ERR_MAX; i++)
			if (st->unresolved[i] && !outside_lua(i))
				fprintf(stderr, "%s %llu, ", sampler__err_name(i), N(st->unresolved[i]));
		fprintf(stderr, "target gone before symbolization %llu)\n", N(st->unsymbolized));
	}
	if (st->unreadable)
		fprintf(stderr, "  %llu %s have frames that could not be read ([unknown])\n",
			N(st->unreadable), unit);
	if (st->truncated)
		fprintf(stderr, "  %llu %s had deeper stacks than --depth %u\n", N(st->truncated),
			unit, depth);
	/* The others ran code their trace called (a C helper) and no return
	 * into the trace was found, or their trace was gone before they were
	 * symbolized (said apart): their leaf is the trace's base frame. */
	if (st->trace_compiled)
		fprintf(stderr, "  compiled: %llu of %llu %s mapped through their trace's "
			"snapshots\n", N(st->trace_mapped), N(st->trace_compiled), unit);
	if (st->trace_gone)
		fprintf(stderr, "  trace gone: %llu compiled %s ran a trace freed before they "
			"were symbolized\n", N(st->trace_gone), unit);
	/* vmstate still named their trace: in LuaJIT's own count (jit.p's
	 * 'N') they are compiled, but no trace code ran there. */
	if (st->trace_in_vm)
		fprintf(stderr, "  leaving a trace: %llu compiled %s in the interpreter's exit "
			"from their trace\n", N(st->trace_in_vm), unit);
#undef N
}

/* The first five collapsed stacks, long ones cut. */
static void top_stacks(const struct collapsed *c)
{
	fputs("  top stacks:\n", stderr);
	for (size_t i = 0; i < 5 && i < c->n; i++) {
		char line[100];

		if (snprintf(line, sizeof(line), "%s %llu", c->lines[i].text,
			     (unsigned long long)c->lines[i].count) > 99)
			fprintf(stderr, "    %.90s…\n", line);
		else
			fprintf(stderr, "    %s\n", line);
	}
}

void summary__samples(const struct profile *p, const struct render_opts *ro,
		      const struct sampler_stats *st, double seconds, unsigned depth)
{
	struct collapsed c;
	bool merged = !profile__collapse(p, ro, &c);

	sample_counts(p, ro, st, seconds, depth, merged ? (long)c.n : -1);
	if (merged) {
		top_stacks(&c);
		collapsed__free(&c);
	}
}

/* The catalog row of a site (reasonId may carry a ".DETAIL" suffix). */
static const struct trace_reason *catalog_row(const struct trace_site *s)
{
	for (int i = 0; i < trace_nreasons; i++) {
		size_t n = strlen(trace_reasons[i].id);

		if (!strncmp(s->reason_id, trace_reasons[i].id, n) &&
		    (s->reason_id[n] == '\0' || s->reason_id[n] == '.'))
			return &trace_reasons[i];
	}
	return NULL;
}

void summary__trace(const struct trace_report *rep)
{
	int shown = 0;

	fprintf(stderr, "nupp-bpf: %llu trace aborts, %llu blacklisted, %zu sites\n",
		rep->total_aborts, rep->blacklisted, rep->nsites);
	if (rep->lost)
		fprintf(stderr, "  %llu abort events lost (ring buffer full)\n", rep->lost);
	for (size_t i = 0; i < rep->nsites && shown < 5; i++) {
		const struct trace_site *s = &rep->sites[i];
		const struct trace_reason *row = catalog_row(s);

		if (strcmp(s->severity, "blacklist") && strcmp(s->reason_class, "blocker"))
			continue;
		fprintf(stderr, "  %-9s %5llu  %s  %s\n", s->severity, s->count, s->location, s->reason);
		if (row)
			fprintf(stderr, "            %s %s\n", row->explanation, row->action);
		shown++;
	}
}

