// SPDX-License-Identifier: MIT
/*
 * test_bcpath.c - user/sampler/bcpath.c over real bytecode: two functions compiled
 * by the LuaJIT this links (jit.util.funcbc gives their instructions,
 * jit.vmdef their opcode names), laid at made-up addresses, and paths
 * between made-up snapshot frames over them, checked step by step:
 *   - along one frame, from one snapshot's pc to the next one's (excluded);
 *   - into a callee at its CALL, up to its compare; out of it at its RET
 *     (a conditional jump not taken on the way) and on in the caller;
 *   - around the loop's back edge (FORL, or JFORL once compiled) to the
 *     loop's start;
 *   - through a call no snapshot shows, into the callee the reader names
 *     (asked with the caller's frame and the upvalue the UGET before the
 *     call loaded), to its return, and past it when the reader knows none;
 *   - a position along the path lands on the bytecode of that weight; a
 *     pc outside the function, or frames that do not lead to each other,
 *     give no path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "sampler/bcpath.h"

static int failed, passed;

#define LV(fn, pc)	{ fn, pc, 0 }	/* a struct bcpath_level, no closure */

static void check(int ok, const char *what)
{
	if (ok) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL %s\n", what);
}

static const char *const CHUNK =
	"local function callee(x)\n"
	"  x = x * 2 + 1\n"
	"  if x > 1e300 then x = 0 end\n"
	"  return x\n"
	"end\n"
	"local function loop(n, x)\n"
	"  for i = 1, n do\n"
	"    x = callee(x)\n"
	"    x = x + 1\n"
	"  end\n"
	"  return x\n"
	"end\n"
	"local jutil, vmdef = require('jit.util'), require('jit.vmdef')\n"
	"local function code(f)\n"
	"  local t, pc = {}, 0\n"
	"  while true do\n"
	"    local ins = jutil.funcbc(f, pc)\n"
	"    if not ins then return t end\n"
	"    t[#t + 1] = ins; pc = pc + 1\n"
	"  end\n"
	"end\n"
	"local names = {}\n"
	"for i = 0, #vmdef.bcnames / 6 - 1 do\n"
	"  names[i + 1] = vmdef.bcnames:sub(6 * i + 1, 6 * i + 6):gsub(' ', '')\n"
	"end\n"
	"return code(callee), code(loop), names\n";

#define FN_CALLEE	0x1000ULL	/* struct nupp_frame.fn of a Lua proto at ... */
#define FN_LOOP		0x2000ULL
#define ADDR_CALLEE	0x100000ULL	/* ... whose bytecode lies at */
#define ADDR_LOOP	0x200000ULL

static __u32 callee_bc[256], loop_bc[256];
static __u32 ncallee, nloop;
static const char *names[256];
static int nnames;
static __u64 callee_of_call;	/* what the reader says the CALL ran */
static int seen_uv;		/* what bcpath asked it */
static __u64 seen_ret;
static struct bcpath_level seen_caller;

static int read_code(void *ctx, __u64 fn, __u64 pc, struct bcpath_code *c)
{
	(void)ctx;
	if (!fn)	/* the base frame: loop's */
		fn = (pc >= ADDR_LOOP && pc <= ADDR_LOOP + 4 * nloop) ? FN_LOOP : 0;
	if (fn == FN_CALLEE)
		*c = (struct bcpath_code){ callee_bc, ncallee, ADDR_CALLEE };
	else if (fn == FN_LOOP)
		*c = (struct bcpath_code){ loop_bc, nloop, ADDR_LOOP };
	else
		return -1;
	return 0;
}

static int read_callee(void *ctx, const struct bcpath_level *caller, __u64 ret, int uv,
		       struct bcpath_level *callee)
{
	(void)ctx;
	seen_uv = uv;
	seen_ret = ret;
	seen_caller = *caller;
	if (!callee_of_call)
		return -1;
	*callee = (struct bcpath_level){ callee_of_call, 0, 0 };
	return 0;
}

static const struct bcpath_reader READER = { read_code, read_callee, NULL };

static int op(__u32 ins)
{
	return ins & 0xff;
}

/* The index of the first instruction named name in bc from index from. */
static int find(const __u32 *bc, __u32 n, const char *name, int from)
{
	for (int i = from; i < (int)n; i++)
		if (op(bc[i]) < nnames && !strcmp(names[op(bc[i])], name))
			return i;
	return -1;
}

static int find_prefix(const __u32 *bc, __u32 n, const char *prefix, int from)
{
	for (int i = from; i < (int)n; i++)
		if (op(bc[i]) < nnames && !strncmp(names[op(bc[i])], prefix, strlen(prefix)))
			return i;
	return -1;
}

/* A frame pc at instruction idx (after it, as frames hold it). */
static __u64 at(__u64 addr, int idx)
{
	return addr + 4 * (__u64)(idx + 1);
}

/* Do p's steps run exactly want[0..n) (pcs) with nlv[0..n) frames? */
static int steps_are(const struct bcpath *p, const __u64 *want, const int *nlv, int n)
{
	if (p->nsteps != n)
		return 0;
	for (int i = 0; i < n; i++)
		if (p->steps[i].pc != want[i] || p->steps[i].nlv != nlv[i])
			return 0;
	return 1;
}

static void load(void)
{
	lua_State *L = luaL_newstate();

	luaL_openlibs(L);
	if (luaL_dostring(L, CHUNK)) {
		printf("FAIL the chunk: %s\n", lua_tostring(L, -1));
		exit(1);
	}
	ncallee = lua_objlen(L, 1);
	nloop = lua_objlen(L, 2);
	nnames = lua_objlen(L, 3);
	for (int t = 1; t <= 2; t++)
		for (int i = 1; i <= (int)lua_objlen(L, t); i++) {
			lua_rawgeti(L, t, i);
			(t == 1 ? callee_bc : loop_bc)[i - 1] = (__u32)lua_tonumber(L, -1);
			lua_pop(L, 1);
		}
	for (int i = 1; i <= nnames; i++) {
		lua_rawgeti(L, 3, i);
		names[i - 1] = strdup(lua_tostring(L, -1));
		lua_pop(L, 1);
	}
	lua_close(L);
}

int main(void)
{
	struct bcpath_ops ops;
	struct bcpath p;
	__u64 want[64];
	int nlv[64], n, err;

	load();
	bcpath_ops_init(&ops, names, nnames);
	int call = find(loop_bc, nloop, "CALL", 0);
	int forl = find(loop_bc, nloop, "FORL", 0);
	int fori = find(loop_bc, nloop, "FORI", 0);
	int cmp = find_prefix(callee_bc, ncallee, "IS", 0);
	int ret = find_prefix(callee_bc, ncallee, "RET", 0);
	check(call > 0 && forl > call && fori >= 0 && fori < call && cmp > 0 && ret > cmp,
	      "the bytecode holds FORI, CALL, FORL in loop and IS*, RET* in callee");
	if (failed)
		return 1;

	/* Along one frame: from FORI + 1 to the CALL (excluded). */
	{
		struct bcpath_level a[] = { LV(0, at(ADDR_LOOP, fori + 1)) };
		struct bcpath_level b[] = { LV(0, at(ADDR_LOOP, call)) };

		err = bcpath_build(&p, &ops, a, 1, b, 1, &READER);
		n = 0;
		for (int i = fori + 1; i < call; i++, n++) {
			want[n] = at(ADDR_LOOP, i);
			nlv[n] = 1;
		}
		check(!err && steps_are(&p, want, nlv, n), "along one frame, the next pc excluded");
		bcpath_free(&p);
	}
	/* Into the callee at the CALL, up to its compare. */
	{
		struct bcpath_level a[] = { LV(0, at(ADDR_LOOP, call)) };
		struct bcpath_level b[] = { LV(0, at(ADDR_LOOP, call)), LV(FN_CALLEE, at(ADDR_CALLEE, cmp)) };

		err = bcpath_build(&p, &ops, a, 1, b, 2, &READER);
		n = 0;
		want[n] = at(ADDR_LOOP, call);
		nlv[n++] = 1;
		for (int i = 0; i < cmp; i++, n++) {
			want[n] = at(ADDR_CALLEE, i);
			nlv[n] = 2;
		}
		check(!err && steps_are(&p, want, nlv, n), "into a callee, up to its compare");
		check(!err && p.steps[n - 1].lv == 1 && p.levels[2].fn == FN_CALLEE,
		      "the callee's steps run in b's frames");
		bcpath_free(&p);
	}
	/* Out of the callee at its RET, on in loop to the FORL (excluded). */
	{
		struct bcpath_level a[] = { LV(0, at(ADDR_LOOP, call)), LV(FN_CALLEE, at(ADDR_CALLEE, cmp)) };
		struct bcpath_level b[] = { LV(0, at(ADDR_LOOP, forl)) };
		int j;

		err = bcpath_build(&p, &ops, a, 2, b, 1, &READER);
		n = 0;
		/* On the way to a return a conditional jump is not taken: the
		 * compare, its JMP, `x = 0`, the RET. */
		for (j = cmp; j <= ret; j++, n++) {
			want[n] = at(ADDR_CALLEE, j);
			nlv[n] = 2;
		}
		for (j = call + 1; j < forl; j++, n++) {
			want[n] = at(ADDR_LOOP, j);
			nlv[n] = 1;
		}
		check(!err && steps_are(&p, want, nlv, n), "out of a callee at its return");
		bcpath_free(&p);
	}
	/* Around the back edge: from the FORL to the CALL of the next
	 * iteration; the same once the FORL is compiled (JFORL). */
	for (int jit = 0; jit < 2; jit++) {
		struct bcpath_level a[] = { LV(0, at(ADDR_LOOP, forl)) };
		struct bcpath_level b[] = { LV(0, at(ADDR_LOOP, call)) };
		__u32 saved = loop_bc[forl];

		if (jit) {
			int jforl = -1;

			for (int o = 0; o < nnames; o++)
				if (!strcmp(names[o], "JFORL"))
					jforl = o;
			loop_bc[forl] = (saved & ~0xffu & 0xffffu) | (7u << 16) | (__u32)jforl;
		}
		err = bcpath_build(&p, &ops, a, 1, b, 1, &READER);
		n = 0;
		want[n] = at(ADDR_LOOP, forl);
		nlv[n++] = 1;
		for (int i = fori + 1; i < call; i++, n++) {
			want[n] = at(ADDR_LOOP, i);
			nlv[n] = 1;
		}
		check(!err && steps_are(&p, want, nlv, n),
		      jit ? "around a JFORL to the loop's start" : "around a FORL to the loop's start");
		bcpath_free(&p);
		loop_bc[forl] = saved;
	}
	/* A call no snapshot shows: into the callee the reader names, to its
	 * return; past it when it names none. */
	__u64 builtin_w = 0, arith_w = 0;

	for (int known = 0; known < 2; known++) {
		struct bcpath_level a[] = { LV(0, at(ADDR_LOOP, call - 1)) };
		struct bcpath_level b[] = { LV(0, at(ADDR_LOOP, call + 2)) };
		int inside = 0;

		callee_of_call = known ? FN_CALLEE : 0;
		err = bcpath_build(&p, &ops, a, 1, b, 1, &READER);
		for (int i = 0; !err && i < p.nsteps; i++)
			if (p.steps[i].nlv == 2) {
				inside++;
				if (p.levels[p.steps[i].lv + 1].fn != FN_CALLEE ||
				    p.levels[p.steps[i].lv].pc != at(ADDR_LOOP, call))
					inside = -1000;
			}
		check(!err && (known ? inside >= cmp : inside == 0),
		      known ? "a call no snapshot shows is followed into the named callee"
			    : "a call of an unknown callee is passed over");
		check(!err && p.steps[p.nsteps - 1].pc == at(ADDR_LOOP, call + 1),
		      "the walk goes on after the call, to the next pc");
		/* loop's only upvalue is callee, loaded by the UGET before it. */
		check(seen_uv == 0 && seen_ret == at(ADDR_LOOP, call) && seen_caller.fn == 0 &&
		      seen_caller.pc == at(ADDR_LOOP, call - 1),
		      "the reader is asked for upvalue 0 of the caller's frame, after the CALL");
		/* Passed over, the call is a builtin compiled in place: it
		 * weighs twice an arithmetic instruction of the callee
		 * (the heaviest step of the path into it, below). */
		for (int i = 0; !err && i < p.nsteps; i++) {
			__u64 w = p.steps[i].cum - (i ? p.steps[i - 1].cum : 0);

			if (!known && p.steps[i].pc == at(ADDR_LOOP, call))
				builtin_w = w;
			else if (known && p.steps[i].nlv == 2 && w > arith_w)
				arith_w = w;
		}
		if (known)
			check(arith_w && builtin_w == 2 * arith_w,
			      "a builtin's call weighs twice an arithmetic instruction");
		/* The middle of the path lies in the callee's arithmetic. */
		if (known) {
			const struct bcpath_step *mid = bcpath_at(&p, 1, 2);

			check(mid && mid->nlv == 2, "half way along lies in the callee");
			const struct bcpath_step *start = bcpath_at(&p, 0, 100);

			check(start->cum > 0 && (start == p.steps || start[-1].cum == 0),
			      "the path's start is its first weighted step");
		}
		bcpath_free(&p);
	}
	callee_of_call = 0;
	/* No path: a pc outside the function, or b's base not a's. */
	{
		struct bcpath_level a[] = { LV(0, at(ADDR_LOOP, call)) };
		struct bcpath_level out[] = { LV(0, ADDR_LOOP + 4 * (__u64)nloop + 64) };
		struct bcpath_level other[] = { LV(FN_CALLEE, at(ADDR_CALLEE, 1)) };
		struct bcpath_level mine[] = { LV(FN_LOOP, at(ADDR_LOOP, forl)) };

		check(bcpath_build(&p, &ops, a, 1, out, 1, &READER) == -1 && !p.nsteps,
		      "a pc outside the function gives no path");
		check(bcpath_build(&p, &ops, mine, 1, other, 1, &READER) == -1,
		      "frames of another function give no path");
	}
	/* Positions: the ends of the path are its first and last steps
	 * with weight. */
	{
		struct bcpath_level a[] = { LV(0, at(ADDR_LOOP, fori + 1)) };
		struct bcpath_level b[] = { LV(0, at(ADDR_LOOP, forl)) };
		const struct bcpath_step *first, *last;

		err = bcpath_build(&p, &ops, a, 1, b, 1, &READER);
		first = bcpath_at(&p, 0, 1000);
		last = bcpath_at(&p, 999, 1000);
		check(!err && first && first->cum > 0 && (first == p.steps || first[-1].cum == 0),
		      "position 0 is the first weighted step");
		check(!err && last && last->cum == p.total, "the end is the last weighted step");
		bcpath_free(&p);
	}
	printf("test_bcpath: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
