// SPDX-License-Identifier: MIT
/*
 * test_tracer.c - the trace-abort collector's own logic, against LuaJIT
 * itself: where an abort happened (jit/v.lua's fmtfunc over
 * lj_debug_pushloc: module and line, a string chunk quoted, one over 40
 * characters as its proto's address in lj_strfmt_wptr's "%p" form, a
 * builtin's name, a C function's address), what the reason is (the
 * traceerr text with its detail, the catalog's id, class and severity, an
 * error object's message, a reason the catalog lacks), and which aborts
 * count (benign ones only when asked, blacklistings always, as such), and the
 * report written as CSV (user/trace/trace_report.c).
 *
 * Embeds the installed libluajit-5.1 (found in the registry by the SHA-256
 * of its .text, as test_symbolize does) and reads its objects through the
 * collector's own code, which reads them as it reads a target's: through
 * process_vm_readv, here of this very process. The collector's functions are
 * static, so user/trace/trace.c is compiled into this file. No root needed.
 * Prints "N passed, M failed"; exits non-zero on a failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "../../user/trace/trace.c"
#include "luajit/elf_file.h"
#include "luajit/lj_revision.h"

static struct {
	struct tr_target tg;
	int passed, failed;
} T;

static void check(int ok, const char *what, const char *want, const char *got)
{
	if (ok) {
		T.passed++;
		return;
	}
	T.failed++;
	printf("FAIL %s\n  want: %s\n  got:  %s\n", what, want, got);
}

static void check_str(const char *what, const char *want, const char *got)
{
	check(!strcmp(want, got), what, want, got);
}

static const struct lj_build *find_build(void)
{
	unsigned char sha[32];
	struct elf_file *ef;
	Dl_info info;
	int ok;

	if (!dladdr((void *)lua_newstate, &info) || !info.dli_fname)
		return NULL;
	ef = elf_file__open(info.dli_fname);
	ok = ef && !elf_file__text_sha256(ef, sha);
	elf_file__close(ef);
	for (int i = 0; ok && i < lj_nknown_builds; i++)
		if (!memcmp(sha, lj_known_builds[i].text_sha256, 32))
			return &lj_known_builds[i];
	fprintf(stderr, "%s: .text matches no registry entry\n", info.dli_fname);
	return NULL;
}

static __u64 tv_num(double d)
{
	__u64 v;

	memcpy(&v, &d, 8);
	return v;
}

static int index_of(const char *const *tab, int n, const char *name)
{
	for (int i = 0; tab && i < n; i++)
		if (!strcmp(tab[i], name))
			return i;
	return -1;
}

/* ---------------------------------------------------------------------------
 * Locations: the collector's against jit.util.funcinfo / jit/v.lua
 */

/* where(f, pos): the collector's location of function f at bytecode pos. */
static int l_where(lua_State *L)
{
	char out[ABORT_SITE_TEXT_MAX];

	abort_site__fmtfunc(&T.tg.src, (__u64)(uintptr_t)lua_topointer(L, 1), (__s32)luaL_checkinteger(L, 2),
		out, sizeof(out));
	lua_pushstring(L, out);
	return 1;
}

/* A C function for jit/v.lua's "C:addr". */
static int l_cfunc(lua_State *L)
{
	return 0;
}

/* For each chunkname, a function loaded under it; each location the
 * collector gives equals jit/v.lua's fmtfunc (funcinfo's loc, ffnames,
 * "C:%x") at every position. */
static const char locations_lua[] =
	"local funcinfo, vmdef = require('jit.util').funcinfo, require('jit.vmdef')\n"
	"local function fmtfunc(func, pc)\n"	/* jit/v.lua */
	"  local fi = funcinfo(func, pc)\n"
	"  if fi.loc then return fi.loc\n"
	"  elseif fi.ffid then return vmdef.ffnames[fi.ffid]\n"
	"  elseif fi.addr then return string.format('C:%x', fi.addr)\n"
	"  else return '(?)' end\n"
	"end\n"
	"local names = {\n"
	"  '@/srv/app/main.lua', '@C:\\\\dir\\\\win.lua', '@plain.lua', '=stdin', '=', '@',\n"
	"  'return 1', string.rep('s', 40), string.rep('s', 41), '=' .. string.rep('n', 40),\n"
	"  '@/' .. string.rep('p', 300) .. '/deep.lua', 'a\\0b',\n"
	"}\n"
	"local src = 'local a = 1\\nlocal b = a + 1\\n\\nreturn function() return a + b end\\n'\n"
	"local bad = 0\n"
	"for _, name in ipairs(names) do\n"
	"  local f = assert(loadstring(src, name))\n"
	"  for _, fn in ipairs({ f, f() }) do\n"
	"    for pos = 0, 4 do\n"
	"      local want, got = fmtfunc(fn, pos), where(fn, pos)\n"
	"      report(want == got, 'location in ' .. name:sub(1, 50) .. ' at ' .. pos, want, got)\n"
	"    end\n"
	"  end\n"
	"end\n"
	"for _, fn in ipairs({ print, string.format, math.floor, cfunc }) do\n"
	"  report(fmtfunc(fn, 0) == where(fn, 0), 'location of a builtin or C function', fmtfunc(fn, 0), where(fn, 0))\n"
	"end\n";

static int l_report(lua_State *L)
{
	check(lua_toboolean(L, 1), luaL_checkstring(L, 2), luaL_optstring(L, 3, "nil"),
	      luaL_optstring(L, 4, "nil"));
	return 0;
}

static void test_locations(lua_State *L)
{
	int before = T.failed;

	lua_register(L, "where", l_where);
	lua_register(L, "cfunc", l_cfunc);
	lua_register(L, "report", l_report);
	if (luaL_dostring(L, locations_lua))
		check(0, "locations script", "runs", lua_tostring(L, -1));
	printf("%-4s locations as jit/v.lua prints them\n", T.failed > before ? "FAIL" : "ok");
}

/* ---------------------------------------------------------------------------
 * Reasons
 */

static void check_reason(const char *what, const struct nupp_trace_event *e, const char *raw,
			 const char *reason, const char *id, const char *cls, const char *severity)
{
	static struct abort_reason r;
	char name[160];

	abort_site__reason(&T.tg.src, e, &r);
	snprintf(name, sizeof(name), "%s: rawReason", what);
	check_str(name, raw, r.raw);
	snprintf(name, sizeof(name), "%s: reason", what);
	check_str(name, reason, r.reason);
	snprintf(name, sizeof(name), "%s: reasonId", what);
	check_str(name, id, r.id);
	snprintf(name, sizeof(name), "%s: reasonClass", what);
	check_str(name, cls, r.cls);
	snprintf(name, sizeof(name), "%s: severity", what);
	check_str(name, severity, trace_site_severity(0, r.row));
}

/* Split line at tabs into at most max fields (empty ones kept); how many. */
static int split_tabs(char *line, char **f, int max)
{
	int n = 0;

	line[strcspn(line, "\n")] = '\0';
	for (char *p = line; n < max; ) {
		f[n++] = p;
		if (!(p = strchr(p, '\t')))
			break;
		*p++ = '\0';
	}
	return n;
}

/* text with each "#" replaced by n. */
static const char *numbered(const char *text, int n, char *out, size_t outsz)
{
	size_t o = 0;

	for (; *text && o + 12 < outsz; text++)
		o += *text == '#' ? (size_t)snprintf(out + o, outsz - o, "%d", n) : (out[o] = *text, 1);
	out[o] = 0;
	return out;
}

/* Every case of tests/fixtures/trace_reasons.tsv (which the Lua API's test
 * runs too): the event a probe would read for the abort, through
 * abort_site__reason. */
static void test_reasons(lua_State *L, const char *path)
{
	const struct lj_build *b = T.tg.src.b;
	char line[1024], *f[7], raw[256], reason[256];
	int before = T.failed, cases = 0;
	FILE *in = fopen(path, "r");

	check(in != NULL, "the reasons fixture opens", path, "no such file");
	while (in && fgets(line, sizeof(line), in)) {
		struct nupp_trace_event e = { 0 };
		int err, n = 0;

		if (line[0] == '#' || split_tabs(line, f, 7) != 7)
			continue;
		err = strcmp(f[0], "-") ? index_of(b->traceerr, b->ntraceerr, f[0]) : b->ntraceerr + 3;
		if (err < 0 && !strcmp(f[0], "NYI: bytecode %d"))	/* the build writes %s */
			err = index_of(b->traceerr, b->ntraceerr, "NYI: bytecode %s");
		check(err >= 0, "the fixture's traceerr is the build's", f[0], "not in its table");
		e.errobj = tv_num(err);
		n = err;
		if (!strncmp(f[1], "bc ", 3))
			e.errinfo = tv_num(n = index_of(b->bcnames, b->nbcnames, f[1] + 3));
		else if (!strncmp(f[1], "ir ", 3))
			e.errinfo = tv_num(n = index_of(b->irnames, b->nirnames, f[1] + 3));
		if (!strncmp(f[1], "error ", 6)) {	/* a string object of this VM */
			lua_pushstring(L, f[1] + 6);
			e.errobj = (__u64)LJ_TSTR << 47 |
				   ((__u64)(uintptr_t)lua_tostring(L, -1) - b->layout.str_size);
			snprintf(e.msg, sizeof(e.msg), "%s", f[1] + 6);
			e.msglen = strlen(e.msg);
		}
		check_reason(f[0], &e, numbered(f[2], n, raw, sizeof(raw)),
			     numbered(f[3], n, reason, sizeof(reason)), f[4], f[5], f[6]);
		if (!strncmp(f[1], "error ", 6))
			lua_pop(L, 1);
		cases++;
	}
	if (in)
		fclose(in);
	check(cases >= 8, "the fixture's cases", ">= 8", cases >= 8 ? "so many" : "fewer");
	printf("%-4s reasons (%s)\n", T.failed > before ? "FAIL" : "ok", path);
}

/* ---------------------------------------------------------------------------
 * Which aborts count
 */

/* An abort of kind err in function fn at bytecode pos, blacklisting its
 * start or not, through the collector's event handler; the site it made,
 * or NULL. */
static const struct trace_site *abort_in(struct tracer *tr, int err, __u64 fn, int pos, bool bl)
{
	const struct lj_build *b = T.tg.src.b;
	struct nupp_trace_event e = {
		.pid = getpid(), .errobj = tv_num(err), .startpc = 1, .L = 1,
		.startins = index_of(b->bcnames, b->nbcnames, "FORL"),
		.startins_now = index_of(b->bcnames, b->nbcnames, bl ? "IFORL" : "FORL"),
	};
	__u64 bc;

	memcpy(&bc, (void *)(uintptr_t)(fn + b->layout.fn_pc), 8);
	/* What the probe found: the function, no name captured (the
	 * collector reads its prototype, which follows from its bytecode). */
	e.loc = (struct nupp_trace_loc){ .fn = fn, .pt = bc - b->layout.pt_size, .pos = pos,
					 .have = NUPP_LOC_FN };
	e.pc = bc + 4 * pos;
	tr->nsites = 0;
	handle_event(tr, &e, sizeof(e));
	return tr->nsites ? &tr->sites[0].s : NULL;
}

static void test_counting(lua_State *L)
{
	const struct lj_build *b = T.tg.src.b;
	int leave = index_of(b->traceerr, b->ntraceerr, "leaving loop in root trace");
	int inner = index_of(b->traceerr, b->ntraceerr, "NYI: bytecode %d");
	struct tracer tr = { .tg = &T.tg, .ntg = 1 };
	const struct trace_site *s;
	const char *want;
	__u64 fn;
	int before = T.failed;

	(void)luaL_dostring(L, "return loadstring('local x = 0\\nfor i = 1, 3 do x = x + i end\\nreturn x', "
			 "'@/srv/loop.lua')");
	fn = (__u64)(uintptr_t)lua_topointer(L, -1);
	luaL_loadstring(L, "return require('jit.util').funcinfo(..., 3).loc");
	lua_pushvalue(L, -2);
	lua_call(L, 1, 1);
	want = lua_tostring(L, -1);

	s = abort_in(&tr, leave, fn, 3, false);
	check(!s, "a benign abort is left out", "no site", s ? s->reason : "");
	tr.include_benign = true;
	s = abort_in(&tr, leave, fn, 3, false);
	check(s && !strcmp(s->severity, "info"), "with --include-benign it counts, as info", "info",
	      s ? s->severity : "no site");
	check_str("the location", want, s ? s->location : "");
	tr.include_benign = false;
	s = abort_in(&tr, leave, fn, 3, true);
	check(s && !strcmp(s->severity, "blacklist"), "a benign abort that blacklists counts",
	      "blacklist", s ? s->severity : "no site");
	s = abort_in(&tr, inner < 0 ? index_of(b->traceerr, b->ntraceerr, "NYI: bytecode %s") : inner,
		     fn, 3, false);
	check(s && !strcmp(s->severity, "warn") && !strcmp(s->reason_class, "blocker"),
	      "a blocker counts, as warn", "warn blocker", s ? s->severity : "no site");
	for (size_t i = 0; i < tr.nsites; i++)
		trace_site__free(&tr.sites[i].s);
	free(tr.sites);
	lua_pop(L, 2);
	printf("%-4s which aborts count\n", T.failed > before ? "FAIL" : "ok");
}

/* ---------------------------------------------------------------------------
 * The rules of a report's sites, from tests/fixtures/trace_sites.tsv, which
 * tests/lua_api/test_lua_api.py runs through the Lua API too
 */


static void test_site_rules(const char *path)
{
	struct trace_site sites[16];
	char line[512], *f[6], name[600];
	int before = T.failed, n = 0;
	FILE *in = fopen(path, "r");

	check(in != NULL, "the site rules fixture opens", path, "no such file");
	while (in && fgets(line, sizeof(line), in)) {
		int nf = line[0] == '#' ? 0 : split_tabs(line, f, 6);

		if (nf == 5 && !strcmp(f[0], "counted")) {
			struct trace_reason row = { .severity = f[2] };
			const char *sev = trace_site_severity(atoi(f[1]), strcmp(f[2], "-") ? &row : NULL);
			const char *got = trace_site_counted(sev, atoi(f[3])) ? sev : "-";

			snprintf(name, sizeof(name), "site of %s %s %s", f[1], f[2], f[3]);
			check_str(name, f[4], got);
		} else if (nf == 6 && !strcmp(f[0], "order") && n < 16) {
			sites[n++] = (struct trace_site){ .severity = strdup(f[1]), .count = atoll(f[2]),
				.reason = strdup(f[3]), .location = strdup(f[4]), .zone_path = strdup(f[5]) };
		}
	}
	if (in)
		fclose(in);
	struct trace_site sorted[16];
	for (int i = 0; i < n; i++)
		sorted[i] = sites[n - 1 - i];
	qsort(sorted, n, sizeof(sorted[0]), trace_site__cmp);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "site %d in order", i);
		check_str(name, sites[i].location, sorted[i].location);
		check_str(name, sites[i].zone_path, sorted[i].zone_path);
		check_str(name, sites[i].reason, sorted[i].reason);
	}
	check(n == 8, "the fixture's eight order rows", "8", n == 8 ? "8" : "another number");
	printf("%-4s site rules (%s)\n", T.failed > before ? "FAIL" : "ok", path);
}

/* The report as CSV (trace_report.c): RFC 4180, a field quoted only when it
 * holds a comma, a quote, CR or LF, its quotes doubled, CRLF line ends. Two
 * sites written as the file path holds them, byte for byte (the Lua API's
 * test writes the same two sites through trace.lua and compares too). */
static void test_csv(const char *path)
{
	struct trace_site sites[2] = {
		{ .severity = "blacklist", .count = 12, .reason_class = "blocker" },
		{ .severity = "info", .count = 12884901888ULL, .reason_class = "stop" },
	};
	struct trace_report r = { .sites = sites, .nsites = 2 };
	char *text = NULL, want[1024] = "";
	size_t len = 0;
	FILE *f = open_memstream(&text, &len), *in = fopen(path, "rb");
	int before = T.failed;

	check(in != NULL, "the CSV fixture opens", path, "no such file");
	if (in) {
		want[fread(want, 1, sizeof(want) - 1, in)] = 0;
		fclose(in);
	}
	trace_site__set_strings(&sites[0], "NYI: bytecode FNEW", "trace.nyi-bytecode.FNEW",
				"NYI: bytecode 51", "\"a,b\":3", "frame/jit");
	trace_site__set_strings(&sites[1], "leaving loop in root trace", "trace.leaving-loop",
				"line\r\nbreak", "app.lua:7", "");
	check(f && !trace_report__write_csv(&r, f), "the CSV is written", "0", "an error");
	if (f)
		fclose(f);
	check_str("the CSV", want, text ? text : "");
	free(text);
	for (int i = 0; i < 2; i++)
		trace_site__free(&sites[i]);
	printf("%-4s CSV (%s)\n", T.failed > before ? "FAIL" : "ok", path);
}

/* The probe reads jit_State, lua_State and GCproto in blocks: every layout
 * of the revision table (each of upstream's and OpenResty's x86-64 GC64
 * revisions and their option variants, but those without the JIT) fits
 * them, and the blocks hold the fields at the offsets the layout gives. */
static void test_blocks(void)
{
	int before = T.failed, n = 0;

	for (int i = 0; i < lj_nrevisions; i++) {
		const struct lj_revision *r = &lj_revisions[i];

		if (!r->layout)
			continue;
		for (int v = -1; v < r->nvariants; v++) {
			struct nupp_trace_proc p = { .lj = v < 0 ? *r->layout : *r->variants[v].layout };
			const struct lj_layout *lj = &p.lj;
			char err[256] = "";
			int fits;

			if (!lj->J_L || !lj->J_cur_traceno)	/* no JIT: no abort to probe */
				continue;
			if (!lj->J_cur_startins)	/* as target_attach fills them in */
				p.lj.J_cur_startins = lj->J_cur_startpc + 8;
			if (!lj->J_flags)
				p.lj.J_flags = lj->J_pt + 16;
			fits = !fit_blocks(&p, 1, err, sizeof(err)) &&
			       lj->J_cur_traceno >= p.j_lo && lj->J_flags + 4 <= p.j_lo + p.j_lo_len &&
			       lj->J_errinfo + 8 <= p.j_hi + p.j_hi_len && lj->J_parent >= p.j_hi &&
			       lj->L_stack + 8 <= p.L_blk + p.L_len && lj->pt_lineinfo + 8 <= p.pt_len &&
			       lj->fn_f + 8 <= p.fn_len;
			check(fits, "the probe's blocks fit the layout", r->commit ? r->commit : r->source,
			      err);
			n++;
		}
	}
	check(n > 100, "layouts checked", ">100", n > 100 ? "ok" : "few");
	printf("%-4s probe blocks over %d layouts\n", T.failed > before ? "FAIL" : "ok", n);
}

int main(int argc, char **argv)
{
	lua_State *L = luaL_newstate();

	T.tg.src.b = find_build();
	if (!L || !T.tg.src.b)
		return 2;
	luaL_openlibs(L);
	T.tg.src.pid = getpid();
	T.tg.src.sym = symbolizer__new(T.tg.src.b, procmem__reader(&T.tg.src.pid));
	test_locations(L);
	test_reasons(L, argc > 2 ? argv[2] : "tests/fixtures/trace_reasons.tsv");
	test_counting(L);
	test_site_rules(argc > 1 ? argv[1] : "tests/fixtures/trace_sites.tsv");
	test_csv(argc > 3 ? argv[3] : "tests/fixtures/trace_report.csv");
	test_blocks();
	symbolizer__free(T.tg.src.sym);
	lua_close(L);
	printf("%d passed, %d failed\n", T.passed, T.failed);
	return T.failed ? 1 : 0;
}
