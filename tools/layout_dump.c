// SPDX-License-Identifier: MIT
/*
 * layout_dump.c - nupp-layout: print the struct lj_layout a file's DWARF gives.
 *
 * The same reader nupp-bpf uses on a target with DWARF (user/luajit/dwarf_layout.c),
 * as a command: scripts/gen-layouts.py runs it on probe objects compiled
 * against each LuaJIT revision's headers, and the tests run it on the
 * pinned rebuilds. Output is one "name value" line per field, in the order
 * of struct lj_layout, or one JSON object with --json.
 */
#include <stdio.h>
#include <string.h>
#include "luajit/dwarf_layout.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: nupp-layout [--json] FILE\n"
		   "       nupp-layout --present FILE   (exit 0 when FILE has .debug_info)\n");
}

static void print_layout(const struct lj_layout *l, int json)
{
	const char *name;
	long long v;

	if (json)
		putchar('{');
	for (int i = 0; (name = dwarf_layout__field(l, i, &v)); i++) {
		if (json)
			printf("%s\"%s\": %lld", i ? ", " : "", name, v);
		else
			printf("%s %lld\n", name, v);
	}
	if (json)
		printf("}\n");
}

int main(int argc, char **argv)
{
	struct lj_layout l;
	char err[256];
	int json = 0, present = 0, i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--present")) {
			present = 1;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (i != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (present)
		return dwarf_layout__present(argv[i]) ? 0 : 1;
	if (dwarf_layout__read(argv[i], &l, err, sizeof(err))) {
		fprintf(stderr, "nupp-layout: error: %s: %s\n", argv[i], err);
		return 1;
	}
	print_layout(&l, json);
	return 0;
}
