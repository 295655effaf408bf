// SPDX-License-Identifier: MIT
/*
 * fuzz_registry.c - what reads the registry and the reason catalog at run
 * time, over bytes the fuzzer makes. The catalog and luajit/revisions.json
 * are parsed at build time, into generated C tables (scripts/gen-reasons.py,
 * scripts/gen-layouts.py); at run time two things meet outside input: the
 * version string found in any ELF file nupp-bpf is pointed at, which picks
 * the revision rows of a build the registry does not know
 * (lj_derive__version_in over a section's bytes), and the VM's reason text,
 * looked up in the catalog (trace_reason__by_text). Whatever the bytes, a
 * version found is a NUL-terminated "LuaJIT 2.0." or "LuaJIT 2.1." string
 * inside them, and rolling only for 2.1; a catalog row found has the text
 * asked for and a class the CSV knows.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "luajit/lj_derive.h"
#include "trace_reasons.h"

static void fail(const char *what, const char *text)
{
	fprintf(stderr, "fuzz_registry: %s: \"%s\"\n", what, text);
	abort();
}

static void check_version(const char *data, size_t size)
{
	struct lj_version v = { .minor = -1 };
	size_t len;
	const char *at;

	if (!lj_derive__version_in(data, size, &v))
		return;
	len = strlen(v.text);
	at = memmem(data, size, v.text, len + 1);	/* with its NUL */
	if (strncmp(v.text, "LuaJIT 2.", 9) || !at)
		fail("a version that is not a string of the section", v.text);
	if (v.minor != v.text[9] - '0' || (v.minor != 0 && v.minor != 1) || v.text[10] != '.')
		fail("a minor version that is not the string's", v.text);
	if (v.rolling && v.minor != 1)
		fail("a rolling 2.0 build", v.text);
}

static void check_reason(const char *data, size_t size)
{
	char *text = strndup(data, size);
	const struct trace_reason *row = text ? trace_reason__by_text(text) : NULL;

	if (row && (strcmp(row->vm_text, text) ||
		    (strcmp(row->cls, "blocker") && strcmp(row->cls, "risk") && strcmp(row->cls, "stop"))))
		fail("a catalog row for another text", text);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_version((const char *)data, size);
	check_reason((const char *)data, size);
	return 0;
}
