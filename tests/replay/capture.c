// SPDX-License-Identifier: MIT
/*
 * capture.c - stop a LuaJIT process at a moment of a kind, and write what a
 * sample there would read (capture.h).
 *
 *	replay-capture PID OUT.cap.gz [any|c|interp|trace|trace-c|returning|link-tail] [TRIES]
 *
 * The process (its main thread) is stopped with ptrace (PTRACE_INTERRUPT,
 * at an instruction boundary, as a timer interrupt finds it), its VM state
 * read, and let go again until the moment is of the kind asked, at most
 * TRIES times (default 2000):
 *	any	whatever it runs;
 *	c	a C function (vmstate LJ_VMST_C), e.g. blocked in io.read;
 *	interp	bytecode in the interpreter;
 *	trace	a trace's own code (not the interpreter, not a file's code);
 *	trace-c	C code a trace called (vmstate a trace, ip in a file's code);
 *	returning  a Lua frame returning in the interpreter: its link slot
 *		(at BASE - 8) is the PC register's value, its results being
 *		copied over its slots (the sampler then walks from its caller);
 *	link-tail  the last instruction of a trace whose last snapshot holds
 *		its base frame's function (slot 0: it returned below its start,
 *		RETF, or tail-called), the jump that links it to another trace:
 *		the frames it inlined are written to the stack and jit_base
 *		moved to the innermost by then (asm_tail_link). Stopped in
 *		such a trace, the thread is single-stepped to it.
 * Then its anonymous mappings (LuaJIT's heap, GG_State, the traces' code)
 * and the top of its C stack are written with its registers and what the
 * sampler is told of the process beyond its build (sampler__describe). As
 * root, or as the process's owner where ptrace allows it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "base/procmem.h"
#include "luajit/lj_target.h"
#include "luajit/symbolize.h"
#include "sampler/sampler.h"
#include "capture.h"

#define STACK_KEEP	(256 * 1024)	/* bytes of the C stack kept above rsp */
#define REGION_MAX	(64u << 20)	/* a larger mapping is no LuaJIT state here */

static int fail(const char *what)
{
	fprintf(stderr, "replay-capture: %s: %s\n", what, strerror(errno));
	return 1;
}

static bool in_code(const struct nupp_proc *p, __u64 a)
{
	for (int i = 0; i < NUPP_CODE_RANGES && p->code[i].hi; i++)
		if (a >= p->code[i].lo && a < p->code[i].hi)
			return true;
	return false;
}

/* Trace n's code of VM g, [*lo, *hi), when its last snapshot holds slot
 * 0 (the first of a snapshot's entries, sorted by slot); -1 otherwise. */
static int base_replacing_trace(const struct nupp_proc *p, pid_t pid, __u64 g, __u32 n,
				__u64 *lo, __u64 *hi)
{
	const struct lj_layout *lj = &p->lj;
	__u64 arr, T, mcode, snap, snapmap;
	__u32 sz, mapofs, first;
	__u16 nsnap;
	__u8 nent;

	if (!lj->gg_j || procmem__read(pid, &arr, 8, g - lj->gg_g + lj->gg_j + lj->J_trace) ||
	    procmem__read(pid, &T, 8, arr + 8 * (__u64)n) || !(T &= LJ_GCVMASK) ||
	    procmem__read(pid, &mcode, 8, T + lj->tr_mcode) ||
	    procmem__read(pid, &sz, 4, T + lj->tr_szmcode) ||
	    procmem__read(pid, &nsnap, 2, T + lj->tr_nsnap) || !nsnap ||
	    procmem__read(pid, &snap, 8, T + lj->tr_snap) ||
	    procmem__read(pid, &snapmap, 8, T + lj->tr_snapmap))
		return -1;
	snap += (__u64)(nsnap - 1) * lj->sn_size;
	if (procmem__read(pid, &mapofs, 4, snap + lj->sn_mapofs) ||
	    procmem__read(pid, &nent, 1, snap + lj->sn_nent) || !nent ||
	    procmem__read(pid, &first, 4, snapmap + 4 * (__u64)mapofs) || first >> 24)
		return -1;
	*lo = mcode;
	*hi = mcode + sz;
	return 0;
}

/* Stopped in trace n's code, single-step to its link when n is such a
 * trace: its last instruction, a jmp rel32 (0xe9). True there, r its
 * registers. */
static bool step_to_link(const struct nupp_proc *p, pid_t pid, __u64 g, __u32 n,
			 struct user_regs_struct *r)
{
	__u64 lo, hi;
	__u8 op = 0;
	int st;

	if (base_replacing_trace(p, pid, g, n, &lo, &hi) || hi - lo < 5 ||
	    procmem__read(pid, &op, 1, hi - 5) || op != 0xe9)
		return false;
	for (int i = 0; i < 2000 && r->rip >= lo && r->rip < hi; i++) {
		if (r->rip == hi - 5)
			return true;
		if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0) || waitpid(pid, &st, __WALL) != pid ||
		    ptrace(PTRACE_GETREGS, pid, 0, r))
			return false;
	}
	return false;
}

/* Is the stopped thread at a moment of the kind asked (or stepped to it:
 * r then holds its registers there)? */
static bool wanted(const char *kind, const struct nupp_proc *p, pid_t pid, __u64 g,
		   struct user_regs_struct *r)
{
	__u64 ip = r->rip, link = 0;
	__s32 vmstate = 0;
	bool in_vm = ip >= p->vm_lo && ip < p->vm_hi;

	if (procmem__read(pid, &vmstate, 4, g + p->lj.g_vmstate))
		return false;
	if (!strcmp(kind, "c"))
		return vmstate == LJ_VMST_C;
	if (!strcmp(kind, "interp"))
		return vmstate == LJ_VMST_INTERP && in_vm;
	if (!strcmp(kind, "trace"))
		return vmstate >= 0 && !in_vm && !in_code(p, ip);
	if (!strcmp(kind, "trace-c"))
		return vmstate >= 0 && in_code(p, ip);
	if (!strcmp(kind, "link-tail"))
		return vmstate > 0 && !in_vm && !in_code(p, ip) &&
		       step_to_link(p, pid, g, (__u32)vmstate, r);
	if (!strcmp(kind, "returning"))
		return vmstate == LJ_VMST_INTERP && in_vm && !procmem__read(pid, &link, 8, r->rdx - 8) &&
		       link == r->rbx;
	return true;
}

static int put(gzFile f, const void *v, size_t n)
{
	return gzwrite(f, v, (unsigned)n) == (int)n ? 0 : -1;
}

/* Where the process's arguments start (/proc/PID/stat, field 48): the
 * top of its stack holds them and its environment, which a capture leaves
 * out (it is committed to the repository); 0 when unknown. */
static __u64 arg_start(pid_t pid)
{
	char path[64], buf[4096], *p;
	unsigned long long v = 0;
	FILE *f;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;	/* after comm */
	fclose(f);
	for (field = 2; p && field < 48; field++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &v);
	return v;
}

/* The anonymous mappings and the top of the stack below the process's
 * arguments, each read whole or left out, into c (read before anything is
 * written: the head counts them). */
static int read_regions(struct capture *c, pid_t pid, __u64 sp)
{
	struct proc_mapping m;
	FILE *maps = procmem__maps_open(pid);
	__u64 args = arg_start(pid);

	if (!maps)
		return -1;
	while (procmem__maps_next(maps, &m)) {
		struct capture_region r = { m.start, m.end - m.start };
		__u32 n = c->head.nregions;

		if (m.perms[0] != 'r' || (m.file[0] && strcmp(m.file, "[heap]") && strcmp(m.file, "[stack]")))
			continue;
		if (!strcmp(m.file, "[stack]")) {
			if (!args || args <= sp || args > m.end)
				continue;
			r.addr = sp & ~0xfffULL;
			r.len = (args & ~7ULL) - r.addr;
			if (r.len > STACK_KEEP)
				r.len = STACK_KEEP;
		}
		if (r.len > REGION_MAX || n == 4096)
			continue;
		c->regions = realloc(c->regions, (n + 1) * sizeof(*c->regions));
		c->data = realloc(c->data, (n + 1) * sizeof(*c->data));
		if (!c->regions || !c->data || !(c->data[n] = malloc(r.len)))
			return -1;
		if (procmem__read(pid, c->data[n], r.len, r.addr)) {
			free(c->data[n]);
			continue;
		}
		c->regions[n] = r;
		c->head.nregions++;
	}
	fclose(maps);
	return 0;
}

int main(int argc, char **argv)
{
	const char *kind = argc > 3 ? argv[3] : "any";
	int tries = argc > 4 ? atoi(argv[4]) : 2000, st;
	struct user_regs_struct regs;
	struct capture c = { .head = { .magic = CAPTURE_MAGIC } };
	struct nupp_proc proc;
	struct symbolizer *sym;
	struct lj_target t;
	char err[512];
	pid_t pid;
	gzFile f;

	if (argc < 3) {
		fprintf(stderr, "usage: replay-capture PID OUT.cap.gz "
			"[any|c|interp|trace|trace-c|returning|link-tail] [TRIES]\n");
		return 2;
	}
	pid = atoi(argv[1]);
	if (lj_target__open(&t, pid, err, sizeof(err)) || t.ngs < 1) {
		fprintf(stderr, "replay-capture: %s\n", t.ngs < 1 ? "no VM found" : err);
		return 1;
	}
	sym = symbolizer__new(lj_target__build(&t), procmem__reader(&pid));
	if (!sym || sampler__describe(&t, sym, &proc, err, sizeof(err))) {
		fprintf(stderr, "replay-capture: %s\n", sym ? err : "out of memory");
		return 1;
	}
	c.head.g = t.gs[0];
	c.head.vm_lo = proc.vm_lo;
	c.head.vm_hi = proc.vm_hi;
	for (int i = 0; i < NUPP_CODE_RANGES && i < CAPTURE_CODE; i++) {
		c.head.code[i][0] = proc.code[i].lo;
		c.head.code[i][1] = proc.code[i].hi;
	}
	c.head.tid = pid;
	snprintf(c.head.build, sizeof(c.head.build), "%s", lj_target__build(&t)->id);
	if (ptrace(PTRACE_SEIZE, pid, 0, 0))
		return fail("PTRACE_SEIZE");
	for (int i = 0;; i++) {
		if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) || waitpid(pid, &st, __WALL) != pid)
			return fail("PTRACE_INTERRUPT");
		if (ptrace(PTRACE_GETREGS, pid, 0, &regs))
			return fail("PTRACE_GETREGS");
		if (wanted(kind, &proc, pid, c.head.g, &regs))
			break;
		if (i == tries) {
			fprintf(stderr, "replay-capture: no moment of kind %s in %d tries\n", kind, tries);
			return 1;
		}
		if (ptrace(PTRACE_CONT, pid, 0, 0))
			return fail("PTRACE_CONT");
		/* 0.1-1.1 ms on: the next stop lands elsewhere in a loop's period */
		nanosleep(&(struct timespec){ 0, 100000 + rand() % 1000000 }, NULL);
	}
	c.head.ip = regs.rip;
	c.head.dispatch = regs.r14;
	c.head.base = regs.rdx;
	c.head.pc = regs.rbx;
	c.head.rbp = regs.rbp;
	c.head.sp = regs.rsp;
	if (read_regions(&c, pid, c.head.sp))
		return fail("reading its memory");
	ptrace(PTRACE_DETACH, pid, 0, 0);
	f = gzopen(argv[2], "wb9");
	if (!f || put(f, &c.head, sizeof(c.head)))
		return fail(argv[2]);
	for (__u32 i = 0; i < c.head.nregions; i++)
		if (put(f, &c.regions[i], sizeof(c.regions[i])) || put(f, c.data[i], c.regions[i].len))
			return fail(argv[2]);
	if (gzclose(f) != Z_OK)
		return fail(argv[2]);
	printf("%s: %s, ip 0x%llx, %u regions\n", argv[2], c.head.build,
	       (unsigned long long)c.head.ip, c.head.nregions);
	return 0;
}
