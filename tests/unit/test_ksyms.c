// SPDX-License-Identifier: MIT
/*
 * test_ksyms.c - user/base/ksyms.c on the running kernel: the one-pass
 * lookup (ksyms__lookup, what the tick clock uses) gives each name the
 * address the whole table (ksyms__load) gives it, modules' symbols and
 * names that do not exist included. Without CAP_SYSLOG every address reads
 * 0 in both, which the comparison still holds to.
 */
#include <stdio.h>
#include "base/ksyms.h"

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

int main(void)
{
	/* The tick's handlers (one or both exist), a core function, a name no
	 * kernel has, and one that a prefix of a real name would match. */
	static const char *const names[] = { "tick_sched_timer", "tick_nohz_handler", "schedule",
					     "nupp_no_such_symbol", "schedul" };
	enum { N = sizeof(names) / sizeof(names[0]) };
	struct ksyms *k = ksyms__load();
	__u64 addrs[N];
	char what[128];

	check(k != NULL, "ksyms__load reads /proc/kallsyms");
	check(ksyms__lookup(names, addrs, N) == 0, "ksyms__lookup reads /proc/kallsyms");
	for (int i = 0; k && i < N; i++) {
		snprintf(what, sizeof(what), "%s: lookup %#llx, table %#llx", names[i],
			 (unsigned long long)addrs[i], (unsigned long long)ksyms__addr(k, names[i]));
		check(addrs[i] == ksyms__addr(k, names[i]), what);
	}
	check(addrs[3] == 0 && addrs[4] == 0, "no address for a name the kernel lacks");
	if (addrs[2])	/* addresses visible: the tick has a handler */
		check(addrs[0] || addrs[1], "tick_sched_timer or tick_nohz_handler exists");
	ksyms__free(k);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
