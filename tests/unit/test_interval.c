// SPDX-License-Identifier: MIT
/*
 * test_interval.c - user/profile/interval.c without root or BPF: cumulative
 * profiles, as the sampler hands them out at each look (rows keep their
 * index, new ones come last), become the counts of each interval, and the
 * intervals add up to the last look's counts, state by state.
 */
#include <stdio.h>
#include <string.h>
#include "profile/interval.h"

static int failed, passed;

static void check(int ok, const char *what)
{
	if (ok) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL %s\n", what);
}

/* A cumulative look: rows 0..n-1 with counts[i] in state i % NUPP_ST_MAX. */
static void look(struct profile *p, int n, const __u64 *counts)
{
	struct profile_frame f = { .name = "a.lua:f", .file = "a.lua", .kind = PROFILE_FRAME_LUA };
	long id = profile__frame(p, &f);
	__u32 frames[1] = { id };

	for (int i = 0; i < n; i++) {
		long r = profile__add(p, 1, 1, 0, "", frames, 1);

		p->rows[r].state[i % NUPP_ST_MAX] = counts[i];
	}
}

int main(void)
{
	/* Three looks: two rows, a third appears, all grow (one not at all). */
	static const __u64 looks[3][3] = { { 5, 7, 0 }, { 9, 7, 4 }, { 20, 8, 4 } };
	static const int rows[3] = { 2, 3, 3 };
	__u64 sum[3] = {};
	struct interval iv = {};

	for (int k = 0; k < 3; k++) {
		struct profile p = {};

		look(&p, rows[k], looks[k]);
		check(!interval__take(&iv, &p), "interval__take succeeds");
		for (int i = 0; i < rows[k]; i++) {
			__u64 want = looks[k][i] - (k ? looks[k - 1][i] : 0);

			check(profile_row__count(&p.rows[i]) == want, "a row's count is its gain");
			check(p.rows[i].state[i % NUPP_ST_MAX] == want, "in its own state");
			sum[i] += profile_row__count(&p.rows[i]);
		}
		profile__free(&p);
	}
	for (int i = 0; i < 3; i++)
		check(sum[i] == looks[2][i], "the intervals add up to the last look");
	interval__free(&iv);
	printf("%-4s intervals\n%d passed, %d failed\n", failed ? "FAIL" : "ok", passed, failed);
	return failed ? 1 : 0;
}
