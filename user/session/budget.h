/* SPDX-License-Identifier: MIT */
/*
 * budget.h - --max-cpu: nupp-bpf's own CPU held under a share of one core
 * by sampling less.
 *
 * Every BUDGET_WINDOW_S the session looks at its own CPU time over the
 * window (getrusage: all its threads). Above the ceiling, the sampler's rate
 * is halved (sampler__slow_down) and a note says so; a sample then counts
 * for 2, 4... so that profiles keep the rate asked and stay comparable with
 * those written before. What nupp-bpf spends grows with the new stacks it
 * must name, which a lower rate finds fewer of; its polls cost the same at
 * any rate, so at 1/SAMPLER_WEIGHT_MAX of the rate asked it stops lowering
 * and says the ceiling is not met. The rate is never raised again: a
 * session's cost falls once its stacks are known, and a rate going up and
 * down would make the files of a --rotate session differ in their noise
 * from one to the next.
 */
#ifndef NUPP_BUDGET_H
#define NUPP_BUDGET_H

#include <stdbool.h>
#include "sampler/sampler.h"

#define BUDGET_WINDOW_S	5.0

struct budget {
	double pct;		/* --max-cpu: % of one core, 0 none */
	double t0, cpu0;	/* the window's start: monotonic s, own CPU s */
	bool done;		/* lowered as far as it goes, and said so */
};

/* Start counting now (after attach: what starting cost is not counted). */
void budget__start(struct budget *b, double pct);

/* At a poll: at the end of a window, lower s's rate if the window cost
 * more than the ceiling. */
void budget__check(struct budget *b, struct sampler *s);

#endif /* NUPP_BUDGET_H */
