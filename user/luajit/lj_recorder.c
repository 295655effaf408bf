// SPDX-License-Identifier: MIT
/*
 * lj_recorder.c - which recorder a build has (lj_recorder.h).
 *
 * A registry build names its Debian source package, whose tree was read. A
 * derived build has a revision (lj_derive.c): a Debian tree again, or a
 * commit of a fork and its time; a rolling build prints its exact commit
 * time. Its recorder is the newest row of its fork at or before that time.
 */
#include <stdio.h>
#include <string.h>
#include "lj_recorder.h"
#include "lj_target.h"
#include "lj_revision.h"

static const struct lj_recorder_row *by_source(const char *package)
{
	size_t n = strlen(package);

	for (int i = 0; i < lj_nrecorder_rows; i++) {
		const char *s = lj_recorder_rows[i].source;
		size_t m = strlen(s);

		if (m >= n && !strcmp(s + m - n, package) && (m == n || s[m - n - 1] == ' '))
			return &lj_recorder_rows[i];
	}
	return NULL;
}

static const struct lj_recorder_row *by_time(const char *fork, __u64 t)
{
	const struct lj_recorder_row *best = NULL;

	for (int i = 0; i < lj_nrecorder_rows; i++) {
		const struct lj_recorder_row *r = &lj_recorder_rows[i];

		if (!strcmp(r->fork, fork) && r->time <= t && (!best || r->time >= best->time))
			best = r;
	}
	return best;
}

const struct lj_recorder *lj_recorder__of(const struct lj_target *t, char *desc, size_t descsz)
{
	const struct lj_recorder_row *row = NULL;
	const struct lj_revision *rev = t->rev;

	if (t->build && t->build->package) {
		row = by_source(t->build->package);
	} else if (rev && rev->source && strcmp(rev->source, "git")) {
		row = by_source(rev->source);
	} else if (rev) {
		__u64 when = t->derived.version.rolling ? t->derived.version.rolling : rev->time;

		row = by_time(rev->fork, when);
	}
	if (!row) {
		snprintf(desc, descsz, "the recorder of this build's revision is not known (%s)",
			 t->build ? t->build->package : rev ? rev->source : "no revision identified");
		return NULL;
	}
	if (row->source[0])
		snprintf(desc, descsz, "%s", row->source);
	else
		snprintf(desc, descsz, "%s %.12s", row->fork, row->commit);
	return &lj_recorders[row->recorder];
}

int lj_recorder__builtin(const struct lj_recorder *r, const char *name)
{
	for (int i = 0; i < r->nbuiltins; i++)
		if (!strcmp(r->builtins[i].name, name))
			return r->builtins[i].kind;
	return -1;
}
