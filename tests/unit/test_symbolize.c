// SPDX-License-Identifier: MIT
/*
 * test_symbolize.c - the symbolizer against LuaJIT's own dumpstack, live.
 *
 * Embeds the installed libluajit-5.1 (the stock Debian "luajit" tree) and
 * registers capture(). Called from Lua, capture() takes the ground truth with
 * luaJIT_profile_dumpstack(L, "F;", -N), walks the same stack with lj_walk.h
 * (the sampler's walk, compiled as plain C over our own memory) and renders it
 * with the symbolizer; both must be equal byte for byte. The registry entry is
 * found by content: the SHA-256 of the loaded library's .text.
 *
 * No root needed. Prints "N passed, M failed"; exits non-zero on a failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/types.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <luajit.h>
#include "luajit/elf_file.h"
#include "luajit/symbolize.h"

/* lj_walk.h reads through LJ_READ: our own memory, as the sampler reads the
 * target's. Reads outside the stack window are counted: the walk's caches
 * are there to save them. The addresses of function headers read are kept. */
static unsigned site_reads, nfn_reads;
static __u64 fn_reads[256];

static int self_read(void *dst, __u32 n, __u64 addr, int beyond_window, int fn_header)
{
	memcpy(dst, (const void *)(unsigned long)addr, n);
	site_reads += beyond_window;
	if (fn_header && nfn_reads < 256)
		fn_reads[nfn_reads++] = addr;
	return 0;
}
/* Expanded inside lj_walk.h, where LJ_CHUNK and LJ_HDR are defined. */
#define LJ_READ(dst, n, addr) self_read(dst, n, addr, (n) != LJ_CHUNK, (n) == LJ_HDR)
#include "lj_walk.h"

#define DUMP_LEVELS 200		/* more than any case's depth */

static struct {
	const struct lj_build *b;
	struct symbolizer *sym;
	const char *expect;	/* the case's stack when not dumpstack's (escapes) */
	int captures;		/* capture() calls in the current case */
	int bad;		/* mismatches in the current case */
	int lines;		/* frame lines compared, all cases */
	int passed, failed;
} T;

/* ---------------------------------------------------------------------------
 * Helpers
 */

static void check(int ok, const char *what, const char *want, const char *got)
{
	if (ok)
		return;
	T.bad++;
	fprintf(stderr, "    %s\n      want: %s\n      got:  %s\n", what, want, got);
}

static __u64 rd64(__u64 addr)
{
	__u64 v;

	memcpy(&v, (const void *)(unsigned long)addr, 8);
	return v;
}

/* Reads our own memory through the kernel, so a bad address fails cleanly. */
static int proc_read(void *ctx, void *dst, size_t n, __u64 addr)
{
	(void)ctx;
	return procmem__read(getpid(), dst, n, addr);
}

static int fail_read(void *ctx, void *dst, size_t n, __u64 addr)
{
	(void)ctx, (void)dst, (void)n, (void)addr;
	return -EFAULT;
}

/* One walk of L's stack from the frame of the running C function, with the
 * caches at epoch (0: none), into frames. Its reads outside the stack window. */
static unsigned walk_once(lua_State *L, struct nupp_frame *frames, __u64 epoch, struct lj_walk *w)
{
	static struct lj_walk_mem m;	/* the caches live on from walk to walk */
	const struct lj_layout *lj = &T.b->layout;
	__u64 l = (__u64)(unsigned long)L;

	m.w = (struct lj_walk){
		.L = l,
		.f = rd64(l + lj->L_base) - 8,
		.bot = rd64(l + lj->L_stack) + 8,
		.max = NUPP_MAX_DEPTH,
		.epoch = epoch,
	};
	site_reads = nfn_reads = 0;
	while (!lj_walk_step(&m, lj))
		;
	*w = m.w;
	memcpy(frames, m.frames, w->depth * sizeof(*frames));
	if (w->err || w->depth == w->max)
		fprintf(stderr, "    walk: err %d, %u frames (the most kept)\n", w->err, w->depth);
	return site_reads;
}

/* More than a set's ways of the n distinct addresses in addrs fall in one
 * set of a cache of 1 << bits sets: a warm walk may miss. */
static int sets_overflow(const __u64 *addrs, unsigned n, unsigned bits)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned same = 0;

		for (unsigned j = 0; j < n; j++)
			same += lj_memo_set_of(addrs[j], bits) == lj_memo_set_of(addrs[i], bits);
		if (same > LJ_MEMO_WAYS)
			return 1;
	}
	return 0;
}

/* The sampler's walk of L's stack: without the caches, then with them cold
 * (a new epoch: nothing cached holds) and warm. All three must give the same
 * frames; the warm walk reads nothing beyond the stack window. */
static int walk(lua_State *L, struct nupp_frame *frames)
{
	static __u64 epoch;
	struct nupp_frame cold[NUPP_MAX_DEPTH], warm[NUPP_MAX_DEPTH];
	__u64 fns[256], sites[NUPP_MAX_DEPTH];
	struct lj_walk w0, w1, w2;
	unsigned r0, r2, nfns, nsites = 0;
	char msg[64];

	r0 = walk_once(L, frames, 0, &w0);
	nfns = nfn_reads;
	memcpy(fns, fn_reads, nfns * sizeof(*fns));
	walk_once(L, cold, ++epoch, &w1);
	r2 = walk_once(L, warm, epoch, &w2);
	check(w1.depth == w0.depth && !memcmp(cold, frames, w0.depth * sizeof(*frames)),
	      "cold cached walk = uncached walk", "equal", "different");
	check(w2.depth == w0.depth && !memcmp(warm, frames, w0.depth * sizeof(*frames)),
	      "warm cached walk = uncached walk", "equal", "different");
	/* Uncached, each frame costs its function's header, and one called
	 * from Lua the CALL instruction before its return address too. Warm,
	 * both come from the caches, unless more of this walk's functions or
	 * call sites share a set than it has ways. */
	for (__u32 k = 0; k + 1 < w0.depth; k++)
		if ((frames[k].pc & NUPP_CALL_MASK) == NUPP_CALL_LUA)
			sites[nsites++] = frames[k + 1].pc & ~(__u64)NUPP_CALL_MASK;
	if (sets_overflow(fns, nfns, LJ_FN_BITS) || sets_overflow(sites, nsites, LJ_SITE_BITS))
		return (int)w0.depth;	/* the saving is not exact: no check */
	snprintf(msg, sizeof(msg), "%u reads, uncached %u, %u frames, %u called from Lua", r2, r0,
		 w0.depth, nsites);
	check(r2 == 0 && r0 == nfns + nsites && nfns == w0.depth,
	      "warm walk reads nothing beyond the stack", "no reads", msg);
	return (int)w0.depth;
}

/* luaJIT_profile_dumpstack without the trailing separator. */
static char *dumpstack(lua_State *L, const char *fmt)
{
	size_t len;
	const char *p = luaJIT_profile_dumpstack(L, fmt, -DUMP_LEVELS, &len);
	char *s = strndup(p, len);

	if (s && len && s[len - 1] == ';')
		s[len - 1] = '\0';
	return s;
}

/* GCproto of the Lua function running in frame fr, 0 for C. */
static __u64 frame_proto(const struct nupp_frame *fr)
{
	return NUPP_FN_KIND(fr->fn) == NUPP_FN_LUA ? NUPP_FN_VALUE(fr->fn) : 0;
}

/* ---------------------------------------------------------------------------
 * capture(): the three views of one stack
 */

/* Frame names: the symbolizer's stack against dumpstack "F;". */
static void check_names(lua_State *L, const struct nupp_frame *frames, int depth)
{
	struct strbuf got = { 0 };
	char *want = dumpstack(L, "F;");
	struct strbuf again = { 0 };
	int r = symbolizer__stack(T.sym, frames, depth, &got);

	check(r == 0, "no frame unreadable", "0", r ? "some" : "0");
	/* The second rendering comes from the caches. */
	symbolizer__stack(T.sym, frames, depth, &again);
	check(!strcmp(got.buf, again.buf), "cached rendering", got.buf, again.buf);
	strbuf__free(&again);
	if (getenv("NUPP_TEST_VERBOSE"))
		printf("     %s\n", got.buf);
	if (T.expect)
		check(!strcmp(T.expect, got.buf), "stack (explicit)", T.expect, got.buf);
	else
		check(!strcmp(want, got.buf), "stack = dumpstack F", want, got.buf);
	free(want);
	strbuf__free(&got);
}

/* One frame's location against lua_getinfo's current line and dumpstack "l". */
static void check_frame_line(lua_State *L, const struct nupp_frame *frames, int k,
			     const char *want_l)
{
	struct strbuf loc = { 0 };
	lua_Debug ar;
	int line = symbolizer__frame_line(T.sym, &frames[k]);
	__u64 pt = frame_proto(&frames[k]);
	__u64 pc = frames[k].pc & ~(__u64)NUPP_CALL_MASK;
	char msg[64];

	if (!lua_getstack(L, k, &ar) || !lua_getinfo(L, "l", &ar)) {
		check(0, "lua_getstack", "a frame", "none");
		return;
	}
	snprintf(msg, sizeof(msg), "%d/%d", line, ar.currentline);
	/* A frame called by Lua has its pc in the walk; the others are unknown. */
	if (pt && (frames[k - 1].pc & NUPP_CALL_MASK) != NUPP_CALL_OTHER)
		check(line >= 0, "line of a frame called by Lua is known", "line", msg);
	if (line < 0)
		return;
	check(line == ar.currentline, "frame line = currentline", "equal", msg);
	T.lines++;
	symbolizer__loc(T.sym, pt, (__u32)((pc - pt - T.b->layout.pt_size) / 4 - 1), &loc);
	check(!strcmp(loc.buf, want_l), "loc = dumpstack l", want_l, loc.buf);
	strbuf__free(&loc);
}

/* Frame lines, innermost (capture itself, level 0) excluded. */
static void check_lines(lua_State *L, const struct nupp_frame *frames, int depth)
{
	char *all = T.expect ? NULL : dumpstack(L, "l;");
	char *field[DUMP_LEVELS], *save = NULL, *p;
	int n = 0, k;

	if (!all)
		return;	/* a case with ';' in names: no splitting */
	for (p = strtok_r(all, ";", &save); p && n < DUMP_LEVELS; p = strtok_r(NULL, ";", &save))
		field[n++] = p;
	check(n == depth, "dumpstack l has one entry per frame", "equal", "different");
	for (k = 1; k < depth && n == depth; k++)
		check_frame_line(L, frames, k, field[n - 1 - k]);
	free(all);
}

static int l_capture(lua_State *L)
{
	struct nupp_frame frames[NUPP_MAX_DEPTH];
	int depth = walk(L, frames);

	T.captures++;
	check_names(L, frames, depth);
	check_lines(L, frames, depth);
	return 0;
}

/* GCproto of the Lua function at stack index idx (a GCfunc in this process). */
static __u64 func_proto(lua_State *L, int idx)
{
	const struct lj_layout *lj = &T.b->layout;
	__u64 fn = (__u64)(unsigned long)lua_topointer(L, idx);

	return ((const unsigned char *)(unsigned long)fn)[lj->fn_ffid] ? 0
		: rd64(fn + lj->fn_pc) - lj->pt_size;
}

/* lineof(f, pos): symbolizer__line of Lua function f's proto. */
static int l_lineof(lua_State *L)
{
	lua_pushinteger(L, symbolizer__line(T.sym, func_proto(L, 1), (__u32)luaL_checkinteger(L, 2)));
	return 1;
}

/* locof(f, pos): symbolizer__loc of Lua function f's proto. */
static int l_locof(lua_State *L)
{
	struct strbuf sb = { 0 };

	symbolizer__loc(T.sym, func_proto(L, 1), (__u32)luaL_checkinteger(L, 2), &sb);
	lua_pushstring(L, sb.buf);
	strbuf__free(&sb);
	return 1;
}

/* unreadable(), called by f from the main chunk: placeholders for frames
 * whose memory cannot be read. */
static int l_unreadable(lua_State *L)
{
	/* A C function renders from its recorded address alone. */
	static const char all[] = "[unknown];[unknown];@0x";
	static const char mid[] = "un.lua:0;[unknown];@0x";	/* then unreadable() */
	struct nupp_frame frames[NUPP_MAX_DEPTH];
	struct symbolizer *s = symbolizer__new(T.b, (struct mem_reader){ fail_read, NULL });
	struct strbuf got = { 0 };
	int depth = walk(L, frames), r;

	T.captures++;
	r = symbolizer__stack(s, frames, depth, &got);
	check(r == 2 && symbolizer__unknown(s) == 2, "2 Lua frames counted unknown", all, got.buf);
	check(!strncmp(got.buf, all, strlen(all)), "nothing readable", all, got.buf);
	/* Only f unreadable: its callee loses the name f's bytecode gives it. */
	frames[1].fn = NUPP_FN(NUPP_FN_LUA, 16);	/* a proto nobody can read */
	strbuf__reset(&got);
	r = symbolizer__stack(T.sym, frames, depth, &got);
	check(r == 1 && !strncmp(got.buf, mid, strlen(mid)), "one frame unreadable", mid, got.buf);
	symbolizer__free(s);
	strbuf__free(&got);
	return 0;
}

/* ---------------------------------------------------------------------------
 * Cases
 */

struct tcase {
	const char *name;
	const char *chunkname;
	const char *code;
	const char *expect;	/* NULL: whatever dumpstack renders */
};

static const struct tcase cases[] = {
	{ "main chunk", "@tests/unit/main.lua", "capture()", NULL },
	{ "nested globals", "@/abs/path/g.lua",
	  "function a() b() end function b() c() end function c() capture() end a()", NULL },
	{ "locals", "@l.lua", "local f = function() capture() end local g = f g()", NULL },
	{ "local C function", "@l.lua", "local cap = capture cap()", NULL },
	{ "upvalues", "@u.lua",
	  "local function f() capture() end local function g() f() end g()", NULL },
	{ "fields", "@f.lua",
	  "local t = { a = { b = {} } } function t.a.b.c() capture() end t.a.b.c()", NULL },
	{ "methods", "@m.lua",
	  "local obj = {} function obj:m() capture() end obj:m()", NULL },
	{ "method via self", "@m.lua",
	  "local o = {} function o:m() capture() end function o:n() self:m() end o:n()", NULL },
	{ "pcall Lua", "@p.lua", "pcall(function() capture() end)", NULL },
	{ "pcall C", "@p.lua", "pcall(capture)", NULL },
	{ "pcall builtin", "@p.lua", "pcall(pcall, capture)", NULL },
	{ "xpcall handler", "@x.lua",
	  "xpcall(function() error('x') end, function(e) capture() return e end)", NULL },
	{ "__index function", "@mm.lua",
	  "local t = setmetatable({}, { __index = function(t, k) capture() return 1 end })"
	  " local x = t.foo", NULL },
	{ "__index on TGETV", "@mm.lua",
	  "local t = setmetatable({}, { __index = function(t, k) capture() end })"
	  " local k = 'z' local x = t[k]", NULL },
	{ "__newindex", "@mm.lua",
	  "local t = setmetatable({}, { __newindex = function() capture() end }) t.x = 1", NULL },
	{ "__add", "@mm.lua",
	  "local mt = { __add = function(a, b) capture() return 0 end }"
	  " local a = setmetatable({}, mt) local c = a + 1", NULL },
	{ "__concat __unm __lt __le __eq", "@mm.lua",
	  "local mt = {} local function h() capture() return true end"
	  " mt.__concat = h mt.__unm = h mt.__lt = h mt.__le = h mt.__eq = h"
	  " local a, b = setmetatable({}, mt), setmetatable({}, mt)"
	  " local x = a .. 'x' x = -a x = a < b x = a <= b x = a == b", NULL },
	{ "__call", "@mm.lua",
	  "local o = setmetatable({}, { __call = function(self) capture() end }) o()", NULL },
	{ "__call on a field", "@mm.lua",
	  "local t = { o = setmetatable({}, { __call = function(self) capture() end }) } t.o()", NULL },
	{ "__tostring", "@mm.lua",
	  "local o = setmetatable({}, { __tostring = function() capture() return '' end })"
	  " local s = tostring(o)", NULL },
	{ "coroutine.resume", "@co.lua",
	  "local co = coroutine.create(function() local function inner() capture() end inner() end)"
	  " assert(coroutine.resume(co))", NULL },
	{ "coroutine.wrap", "@co.lua",
	  "local w = coroutine.wrap(function(x) capture() coroutine.yield() end) w(1)", NULL },
	{ "coroutine resumed twice", "@co.lua",
	  "local co = coroutine.wrap(function() coroutine.yield() capture() end) co() co()", NULL },
	{ "varargs", "@v.lua",
	  "local function v(...) capture() end v(1, 2, 3)", NULL },
	{ "varargs nested", "@v.lua",
	  "local function v(...) local function w(...) capture(...) end w(...) end v(1, 2)", NULL },
	{ "vararg main", "@v.lua", "local a = ... capture()", NULL },
	{ "tail call", "@tc.lua",
	  "local function leaf() capture() end local function mid() return leaf() end"
	  " function top() mid() end top()", NULL },
	{ "tail call into C", "@tc.lua",
	  "local function t() return capture() end t()", NULL },
	{ "recursion", "@r.lua",
	  "local function r(n) if n == 0 then capture() else r(n - 1) end end r(5)", NULL },
	{ "string chunk", "=(load)", "load('capture()')()", NULL },
	{ "named string chunk", "=(load)",
	  "load('local function x() capture() end x()', '=some/dir/named')()", NULL },
	{ "@ chunk, backslashes", "=(load)",
	  "loadstring('local y = function() capture() end y()', '@C:\\\\dir\\\\w.lua')()", NULL },
	{ "long @ chunkname", "=(load)",
	  "loadstring('local function x() capture() end x()',"
	  " '@' .. string.rep('dir/', 100) .. 'long.lua')()", NULL },
	{ "long string chunk", "=(load)",
	  "loadstring(string.rep(' ', 300) .. 'local function x() capture() end x()')()", NULL },
	{ "= chunk", "=stdin", "local function f() capture() end f()", NULL },
	{ "bytecode builtin", "@bb.lua",
	  "table.foreach({ 1 }, function() capture() end)", NULL },
	{ "bytecode builtin calls C", "@bb.lua", "table.foreach({ 1 }, capture)", NULL },
	{ "unnamed bytecode builtin", "@bb.lua", "pcall(table.foreach, { 1 }, capture)", NULL },
	{ "generic for iterator", "@it.lua",
	  "local function it(s, c) if c == nil then capture() return 1 end end"
	  " for k in it do end", NULL },
	{ "numeric for local", "@for.lua", "for i = 1, 2 do local f = capture f() end", NULL },
	{ "stripped bytecode", "@st.lua",
	  "local f = loadstring(string.dump(function() local g = capture g() end, true)) f()", NULL },
	{ "stripped upvalue", "@st.lua",
	  "local up = capture local f = load(string.dump(function() up() end, true))"
	  " debug.setupvalue(f, 1, capture) f()", NULL },
	{ "hot loop (JIT)", "@jit.lua",
	  "local function f(i) if i % 50 == 0 then capture() end end"
	  " for i = 1, 300 do f(i) end", NULL },
	{ "deep", "@d.lua",
	  "local function d(n) if n == 0 then return capture() end d(n - 1) end d(40)", NULL },
	{ "escapes", "@dir/we;ird.lua",
	  "local t = {} t['a;b\\n\\\\'] = function() capture() end t['a;b\\n\\\\']()",
	  "we\\x3bird.lua:0;we\\x3bird.lua:a\\x3bb\\x0a\\x5c;capture" },
	{ "unreadable memory", "@un.lua",
	  "local function f() unreadable() end f()", NULL },
	{ "line lookup", "@ln.lua",
	  "local function f(a)\n local b = a + 1\n\n return b\nend\n"
	  "local util = require('jit.util')\n"
	  "local n = util.funcinfo(f).bytecodes\n"
	  "for pos = 0, n - 1 do\n"
	  "  local line = util.funcinfo(f, pos).currentline\n"
	  "  assert(lineof(f, pos) == line, pos)\n"
	  "  assert(locof(f, pos) == 'ln.lua:' .. line, locof(f, pos))\n"
	  "end\n"
	  "assert(lineof(f, n) == 5) assert(lineof(f, n + 1) == 0)\n"
	  /* Out of range (a pc past the function's end or before its start),
	   * as lj_debug_pushloc says: the trace collector's abort locations
	   * rely on it. */
	  "for _, pos in ipairs({n, n + 1, n + 1000, -1}) do\n"
	  "  local loc = util.funcinfo(f, pos).loc\n"
	  "  assert(locof(f, pos) == loc and 'ln.lua:' .. lineof(f, pos) == loc, loc)\n"
	  "end\n"
	  "assert(locof(table.foreach, 1) == '[builtin:foreach]')\n"
	  "capture()", NULL },
};

/* Lua source of a function spanning lines+ lines, capture() on its last one;
 * numline decides the lineinfo width (u8 < 256 <= u16 < 65536 <= u32). */
static char *long_function(int lines)
{
	const char *head = "local function f()\n", *tail = "capture() end f()";
	size_t n = strlen(head) + lines + strlen(tail) + 1;
	char *s = malloc(n);

	if (!s)
		return NULL;
	strcpy(s, head);
	memset(s + strlen(head), '\n', lines);
	strcpy(s + strlen(head) + lines, tail);
	return s;
}

static void run(lua_State *L, const char *name, const char *chunkname,
		const char *code, const char *expect)
{
	int err;

	T.expect = expect;
	T.captures = T.bad = 0;
	err = luaL_loadbuffer(L, code, strlen(code), chunkname) || lua_pcall(L, 0, 0, 0);
	if (err) {
		fprintf(stderr, "    error: %s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
		T.bad++;
	}
	if (!T.captures) {
		fprintf(stderr, "    capture() never ran\n");
		T.bad++;
	}
	printf("%-4s %s\n", T.bad ? "FAIL" : "ok", name);
	if (T.bad)
		T.failed++;
	else
		T.passed++;
}

static void run_long(lua_State *L)
{
	static const int sizes[] = { 300, 70000 };
	char name[64];
	unsigned i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *code = long_function(sizes[i]);

		snprintf(name, sizeof(name), "lineinfo of a %d-line function", sizes[i]);
		if (code)
			run(L, name, "@long.lua", code, NULL);
		free(code);
	}
}

/* ---------------------------------------------------------------------------
 * Escaping, without Lua
 */

static void test_escape(void)
{
	static const struct { const char *in; size_t n; const char *out; } v[] = {
		{ "plain name", 10, "plain name" },
		{ "a;b", 3, "a\\x3bb" },
		{ "l1\nl2\r", 6, "l1\\x0al2\\x0d" },
		{ "back\\slash", 10, "back\\x5cslash" },
		{ "\x01\x1f\x7f", 3, "\\x01\\x1f\\x7f" },
		{ "nul\0x", 5, "nul\\x00x" },
		{ "caf\xc3\xa9", 5, "caf\xc3\xa9" },
		{ "\xe2\x82\xac\xf0\x9f\x98\x80", 7, "\xe2\x82\xac\xf0\x9f\x98\x80" },
		/* Not UTF-8: a stray continuation byte (a name read from freed
		 * memory: "truth.l\x90\0"), a cut sequence, an overlong '/', a
		 * surrogate, past U+10FFFF, Latin-1. */
		{ "truth.l\x90", 8, "truth.l\\x90" },
		{ "ab\xc3", 3, "ab\\xc3" },
		{ "\xc0\xaf", 2, "\\xc0\\xaf" },
		{ "\xed\xa0\x80", 3, "\\xed\\xa0\\x80" },
		{ "\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80" },
		{ "caf\xe9!", 5, "caf\\xe9!" },
		{ "", 0, "" },
	};
	unsigned i;

	T.bad = 0;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct strbuf sb = { 0 };

		strbuf__put_escaped(&sb, v[i].in, v[i].n);
		check(sb.buf && !strcmp(sb.buf, v[i].out), "strbuf__put_escaped", v[i].out,
		      sb.buf ? sb.buf : "(null)");
		strbuf__free(&sb);
	}
	printf("%-4s %s\n", T.bad ? "FAIL" : "ok", "escaping");
	if (T.bad)
		T.failed++;
	else
		T.passed++;
}

/* ---------------------------------------------------------------------------
 * Setup: the registry entry of the loaded library
 */

static const struct lj_build *find_build(void)
{
	unsigned char sha[32];
	struct elf_file *ef;
	Dl_info info;
	int i, ok;

	if (!dladdr((void *)lua_newstate, &info) || !info.dli_fname) {
		fprintf(stderr, "cannot locate the LuaJIT library\n");
		return NULL;
	}
	ef = elf_file__open(info.dli_fname);
	ok = ef && !elf_file__text_sha256(ef, sha);
	elf_file__close(ef);
	for (i = 0; ok && i < lj_nknown_builds; i++)
		if (!memcmp(sha, lj_known_builds[i].text_sha256, 32))
			return &lj_known_builds[i];
	fprintf(stderr, "%s: .text matches no registry entry\n", info.dli_fname);
	return NULL;
}

static lua_State *lua_setup(void)
{
	lua_State *L = luaL_newstate();

	if (!L)
		return NULL;
	luaL_openlibs(L);
	lua_register(L, "capture", l_capture);
	lua_register(L, "lineof", l_lineof);
	lua_register(L, "locof", l_locof);
	lua_register(L, "unreadable", l_unreadable);
	return L;
}

/* Pointers as LuaJIT's own "%p" prints them (lj_strfmt_wptr), for values
 * whose bytes above 32 bits fill 0..4 bytes (its digit count rounds at
 * byte boundaries: 0xab12345678 has two digits more, not four). */
static void test_fmt_ptr(lua_State *L)
{
	static const __u64 v[] = {
		0, 1, 0x12345678, 0xffffffff, 0x1ffffffffULL, 0xab12345678ULL, 0xff12345678ULL,
		0x1ab12345678ULL, 0x7f12345678abULL, 0x8000deadbeefULL, 0xffff12345678ULL,
		0x7fffffffffffULL,
	};

	T.bad = 0;
	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char got[SYMBOLIZE_PTR_MAX];
		const char *want = lua_pushfstring(L, "%p", (void *)(uintptr_t)v[i]);

		symbolize__fmt_ptr(got, v[i]);
		check(!strcmp(got, want), "symbolize__fmt_ptr", want, got);
		lua_pop(L, 1);
	}
	printf("%-4s %s\n", T.bad ? "FAIL" : "ok", "pointers as %p");
	if (T.bad)
		T.failed++;
	else
		T.passed++;
}

int main(void)
{
	lua_State *L;
	unsigned i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!(T.b = find_build()))
		return 2;
	printf("registry entry: %s\n", T.b->id);
	T.sym = symbolizer__new(T.b, (struct mem_reader){ proc_read, NULL });
	if (!T.sym || !(L = lua_setup()))
		return 2;
	test_escape();
	test_fmt_ptr(L);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run(L, cases[i].name, cases[i].chunkname, cases[i].code, cases[i].expect);
	run_long(L);
	lua_close(L);
	symbolizer__free(T.sym);
	printf("%d frame lines compared\n%d passed, %d failed\n", T.lines, T.passed, T.failed);
	return T.failed ? 1 : 0;
}
