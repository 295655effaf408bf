// SPDX-License-Identifier: MIT
/* dump_print.c - what `nupp-bpf dump` found, as text or JSON (dump_int.h). */
#include <stdio.h>
#include <string.h>
#include "base/text.h"
#include "base/util.h"
#include "dump_int.h"

/* Names of the x86-64 system calls a server is found blocked in. */
static const char *syscall_name(long nr)
{
	static const struct { long nr; const char *name; } known[] = {
		{ 0, "read" }, { 1, "write" }, { 7, "poll" }, { 17, "pread64" },
		{ 18, "pwrite64" }, { 19, "readv" }, { 20, "writev" }, { 23, "select" },
		{ 34, "pause" }, { 35, "nanosleep" }, { 42, "connect" }, { 43, "accept" },
		{ 44, "sendto" }, { 45, "recvfrom" }, { 46, "sendmsg" }, { 47, "recvmsg" },
		{ 61, "wait4" }, { 72, "fcntl" }, { 73, "flock" }, { 74, "fsync" },
		{ 202, "futex" }, { 230, "clock_nanosleep" }, { 232, "epoll_wait" },
		{ 247, "waitid" }, { 257, "openat" }, { 270, "pselect6" }, { 271, "ppoll" },
		{ 281, "epoll_pwait" }, { 288, "accept4" }, { 441, "epoll_pwait2" },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i].nr == nr)
			return known[i].name;
	return NULL;
}

static const char *const compiling_phase[] = {	/* by ~vmstate - 3: EXIT .. ASM */
	"trace exit", "recording", "optimizing", "assembling",
};

/* What the VM runs, in words: "compiled (trace 3)", "compiling (recording)". */
static void vmstate_text(const struct dvm *vm, char *buf, size_t size)
{
	const char *name = profile_state_names[vm->state];

	if (vm->state == NUPP_ST_COMPILED && vm->vmstate >= 0)
		snprintf(buf, size, "%s (trace %d)", name, vm->vmstate);
	else if (vm->state == NUPP_ST_COMPILING && vm->vmstate <= LJ_VMST_EXIT &&
		 vm->vmstate >= LJ_VMST_ASM)
		snprintf(buf, size, "%s (%s)", name, compiling_phase[~vm->vmstate - 3]);
	else
		snprintf(buf, size, "%s", name);
}

/* A thread's whereabouts: "blocked in read (pipe_read)", "running". */
static void thread_text(const struct dthread *th, char *buf, size_t size)
{
	const char *call = syscall_name(th->nr);
	char nr[24];

	snprintf(nr, sizeof(nr), "system call %ld", th->nr);
	if (!th->blocked)
		snprintf(buf, size, th->state == 'R' ? "running" : "state %c", th->state);
	else if (th->nr < 0)
		snprintf(buf, size, "state %c, outside a system call", th->state);
	else
		snprintf(buf, size, "blocked in %s%s%s%s", call ? call : nr,
			 th->wchan[0] ? " (" : "", th->wchan, th->wchan[0] ? ")" : "");
}

void dump__print_text(const struct dump *d, FILE *out)
{
	const struct lj_build *b = lj_target__build(&d->t);
	char what[128], where[160];
	int orphans = 0;

	fprintf(out, "PID %d: %s (%s), %d VM%s, %d thread%s\n", d->pid, d->t.shown,
		d->t.build ? b->id : b->package, d->nvms, d->nvms == 1 ? "" : "s",
		d->nthreads, d->nthreads == 1 ? "" : "s");
	for (int i = 0; i < d->nvms; i++) {
		const struct dvm *vm = &d->vms[i];
		const struct dthread *th = vm->thread >= 0 ? &d->threads[vm->thread] : NULL;

		vmstate_text(vm, what, sizeof(what));
		if (th)
			thread_text(th, where, sizeof(where));
		fprintf(out, "\nVM 0x%llx: %s, ", (unsigned long long)vm->g, what);
		if (th)
			fprintf(out, "thread %d (%s) %s\n", th->tid, th->comm, where);
		else
			fprintf(out, "thread not known\n");
		if (vm->from == FROM_SAMPLE)
			fprintf(out, "  (sampled: this stack %llu of %llu samples in %u ms)\n",
				(unsigned long long)vm->samples, (unsigned long long)vm->of,
				d->window_ms);
		if (vm->note[0])
			fprintf(out, "  (%s)\n", vm->note);
		for (int k = 0; k < vm->nframes; k++) {
			const struct dframe *f = &vm->frames[k];

			if (f->kind == PROFILE_FRAME_LUA && f->line)
				fprintf(out, "  %s:%u\n", f->name, f->line);
			else
				fprintf(out, "  %s\n", f->name);
		}
		if (vm->truncated)
			fprintf(out, "  ...\n");
	}
	for (int i = 0; i < d->nthreads; i++) {
		const struct dthread *th = &d->threads[i];

		if (th->vm >= 0)
			continue;
		if (!orphans++)
			fprintf(out, "\nThreads in no VM known:\n");
		thread_text(th, where, sizeof(where));
		fprintf(out, "  %d (%s) %s\n", th->tid, th->comm, where);
	}
}

static const char *const kind_names[] = {
	[PROFILE_FRAME_LUA] = "lua", [PROFILE_FRAME_C] = "c",
	[PROFILE_FRAME_BUILTIN] = "builtin", [PROFILE_FRAME_UNKNOWN] = "unknown",
	[PROFILE_FRAME_KERNEL] = "kernel",
};

/* A thread's fields, as a JSON object left open for the caller's. */
static void json_thread(const struct dthread *th, FILE *out)
{
	const char *call = syscall_name(th->nr);

	fprintf(out, "{\"tid\": %d, \"comm\": ", th->tid);
	text__put_json(out, th->comm);
	fprintf(out, ", \"state\": \"%s\", \"syscall\": ", th->blocked ? "blocked" : "running");
	if (th->blocked && th->nr >= 0) {
		fprintf(out, "%ld, \"syscall_name\": ", th->nr);
		if (call)
			text__put_json(out, call);
		else
			fputs("null", out);
		fputs(", \"wchan\": ", out);
		text__put_json(out, th->wchan);
	} else {
		fputs("null, \"syscall_name\": null, \"wchan\": null", out);
	}
}

static void json_vm(const struct dump *d, const struct dvm *vm, FILE *out)
{
	static const char *const from[] = { "none", "memory", "sample" };
	const struct dthread *th = vm->thread >= 0 ? &d->threads[vm->thread] : NULL;

	fprintf(out, "    {\"vm\": \"0x%llx\", \"vmstate\": \"%s\", \"trace\": ",
		(unsigned long long)vm->g, profile_state_names[vm->state]);
	if (vm->state == NUPP_ST_COMPILED && vm->vmstate >= 0)
		fprintf(out, "%d", vm->vmstate);
	else
		fputs("null", out);
	fprintf(out, ", \"thread\": ");
	if (th) {
		json_thread(th, out);
		fprintf(out, "}, \"thread_from\": \"%s\"", vm->thread_how);
	} else {
		fputs("null, \"thread_from\": null", out);
	}
	fprintf(out, ", \"stack_from\": \"%s\", \"samples\": %llu, \"vm_samples\": %llu, "
		"\"note\": ", from[vm->from], (unsigned long long)vm->samples,
		(unsigned long long)vm->of);
	if (vm->note[0])
		text__put_json(out, vm->note);
	else
		fputs("null", out);
	fprintf(out, ", \"truncated\": %s,\n     \"frames\": [", vm->truncated ? "true" : "false");
	for (int k = 0; k < vm->nframes; k++) {
		const struct dframe *f = &vm->frames[k];

		fprintf(out, "%s\n      {\"name\": ", k ? "," : "");
		text__put_json(out, f->name);
		fprintf(out, ", \"kind\": \"%s\", \"file\": ", kind_names[f->kind]);
		if (f->kind == PROFILE_FRAME_LUA) {
			text__put_json(out, f->file);
			fprintf(out, ", \"line\": ");
			fprintf(out, f->line ? "%u" : "null", f->line);
			fprintf(out, ", \"start_line\": %u}", f->start_line);
		} else {
			fputs("null, \"line\": null, \"start_line\": null}", out);
		}
	}
	fprintf(out, "%s]}", vm->nframes ? "\n     " : "");
}

void dump__print_json(const struct dump *d, FILE *out)
{
	const struct lj_build *b = lj_target__build(&d->t);

	fprintf(out, "{\"pid\": %d, \"file\": ", d->pid);
	text__put_json(out, d->t.shown);
	fputs(", \"build\": ", out);
	text__put_json(out, d->t.build ? b->id : b->package);
	fprintf(out, ", \"sample_window_ms\": %u, \"elapsed_ms\": %.1f,\n  \"vms\": [\n",
		d->window_ms, 1e3 * monotonic_s() - d->t0);
	for (int i = 0; i < d->nvms; i++) {
		json_vm(d, &d->vms[i], out);
		fputs(i + 1 < d->nvms ? ",\n" : "\n", out);
	}
	fputs("  ],\n  \"threads\": [", out);
	for (int i = 0; i < d->nthreads; i++) {
		fprintf(out, "%s\n    ", i ? "," : "");
		json_thread(&d->threads[i], out);
		if (d->threads[i].vm >= 0)
			fprintf(out, ", \"vm\": \"0x%llx\"}",
				(unsigned long long)d->vms[d->threads[i].vm].g);
		else
			fputs(", \"vm\": null}", out);
	}
	fputs("\n  ]}\n", out);
}

