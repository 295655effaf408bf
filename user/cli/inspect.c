// SPDX-License-Identifier: MIT
/*
 * inspect.c - `nupp-bpf inspect FILE|-p PID`: what nupp-bpf knows of a
 * LuaJIT build before it probes anything.
 *
 * For a user whose build is refused, or who wants to see where the probes
 * would go: how the build was identified (registry, or described from its
 * version, revision table, DWARF and code), its interpreter range, and
 * every probe site, each verified by decoding as it would be before use.
 * With -p, also the VMs found in the process under the verified layout.
 * Nothing is attached; no privileges beyond reading the file or the
 * process's memory are needed.
 */
#include <stdio.h>
#include <string.h>
#include "luajit/code_sites.h"
#include "luajit/vm_coroutines.h"
#include "inspect.h"
#include "luajit/lj_target.h"
#include "base/say.h"

static void site(FILE *out, const struct lj_target *t, const char *what, __u64 at, int kind,
		 const char *why)
{
	char bad[256];

	if (!at) {
		fprintf(out, "%-12s none: %s\n", what, why[0] ? why : "not found");
		return;
	}
	if (code_sites__verify(t->path, at, kind, &t->layout, bad, sizeof(bad)))
		fprintf(out, "%-12s 0x%llx REFUSED: %s\n", what, (unsigned long long)at, bad);
	else
		fprintf(out, "%-12s 0x%llx verified\n", what, (unsigned long long)at);
}

/* --waits' sites in the VM's coroutine fast functions: decoded and matched
 * as they are before a probe (vm_coroutines__find is their check). */
static void coroutine_sites(FILE *out, const struct lj_target *t)
{
	struct vm_coroutine_sites vm;
	const struct { const char *what; const __u64 *at; } sites[] = {
		{ "co-yield", &vm.yield }, { "co-resume", &vm.resume }, { "co-wrap", &vm.wrap },
	};

	vm_coroutines__find(t->path, &t->layout, &vm);
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++)
		if (*sites[i].at)
			fprintf(out, "%-12s 0x%llx verified\n", sites[i].what,
				(unsigned long long)*sites[i].at);
		else
			fprintf(out, "%-12s none: %s\n", sites[i].what, vm.why);
}

static void show(FILE *out, const struct lj_target *t)
{
	const struct lj_build *b = lj_target__build(t);
	const struct lj_code_sites *cs = &t->sites;

	fprintf(out, "file         %s\n", t->shown);
	if (t->build)
		fprintf(out, "build        %s (registry: %s)\n", b->id, b->package);
	else
		fprintf(out, "build        derived: %s\n", b->package);
	fprintf(out, "interpreter  0x%llx-0x%llx\n", (unsigned long long)(t->vm_lo - t->bias),
		(unsigned long long)(t->vm_hi - t->bias));
	site(out, t, "gc-cycle", lj_target__sym(t, "lj_gc_separateudata"), CODE_SITE_FUNC_ENTRY,
	     cs->gc_why);
	site(out, t, "vm-start", lj_target__func(t, "luaL_openlibs"), CODE_SITE_FUNC_ENTRY,
	     "luaL_openlibs is not exported");
	site(out, t, "trace-abort", cs->abort_site, CODE_SITE_TRACENO_JCC, cs->abort_why);
	for (int i = 0; i < cs->abort_nmore; i++)
		site(out, t, "trace-abort", cs->abort_more[i], CODE_SITE_TRACENO_JCC, "");
	if (cs->abort_site)
		fprintf(out, "jit-state    in %s at the trace-abort site\n",
			code_sites__reg_name(cs->abort_j_reg));
	coroutine_sites(out, t);
}

int inspect__run(const char *file, pid_t pid)
{
	struct lj_target t;
	char err[1024];

	if (file ? lj_target__open_file(&t, file, err, sizeof(err)) :
		   lj_target__open(&t, pid, err, sizeof(err))) {
		say__error("%s", err);
		return 1;
	}
	show(stdout, &t);
	if (!file) {
		fprintf(stdout, "pid          %d\n", pid);
		for (int i = 0; i < t.ngs; i++)
			fprintf(stdout, "vm           g=0x%llx (layout verified)\n",
				(unsigned long long)t.gs[i]);
		if (!t.ngs)
			fprintf(stdout, "vm           none found%s%s\n", t.layout_why[0] ? ": " : "",
				t.layout_why);
	}
	return 0;
}
