// SPDX-License-Identifier: MIT
/* budget.c - --max-cpu (budget.h). */
#include "budget.h"
#include "base/say.h"
#include "base/util.h"

void budget__start(struct budget *b, double pct)
{
	*b = (struct budget){ .pct = pct, .t0 = monotonic_s(), .cpu0 = own_cpu_s() };
}

void budget__check(struct budget *b, struct sampler *s)
{
	double t = monotonic_s(), cpu, used;
	int weight;

	if (!b->pct || b->done || !s || t - b->t0 < BUDGET_WINDOW_S)
		return;
	cpu = own_cpu_s();
	used = 100 * (cpu - b->cpu0) / (t - b->t0);
	b->t0 = t;
	b->cpu0 = cpu;
	if (used <= b->pct)
		return;
	weight = sampler__slow_down(s);
	if (weight > 0) {
		say__note("note: its own CPU was %.2f%% of a core over %.0f s, above "
			  "--max-cpu %g%%: sampling at %.0f Hz from now (a sample counts for %d)",
			  used, BUDGET_WINDOW_S, b->pct,
			  1e9 / (sampler__period_ns(s) * (double)weight), weight);
		return;
	}
	b->done = true;
	say__note("note: its own CPU was %.2f%% of a core over %.0f s, above --max-cpu "
		  "%g%%, at 1/%u of the rate asked: it samples no less often", used,
		  BUDGET_WINDOW_S, b->pct, sampler__weight(s));
}
