// SPDX-License-Identifier: MIT
/*
 * lua_module.c - nupp.profile.bpf: the BPF backend of nupp.profile.
 *
 * Sessions of require("nupp.profile") attach the sampler and the trace-abort
 * collector to this very process. The module knows its own lua_State, so no
 * discovery is needed: the VM is G(L), and the build is identified by
 * content as for any target. The interface is the one lua/nupp/profile.lua
 * documents for backends:
 *	available() -> true | false, reason
 *	sample({intervalMs, stackDepth}, add) -> {pause, resume, stop, sync}
 *	trace({includeBenign}, add) -> {pause, resume, stop, sync, recorder}
 *	recorder() -> {luajitRevision, luajitVersion} (no privileges needed)
 *	writefile(name, text) -> true | nil, error (as the CLI writes -o: output.h)
 *	heap() -> census | nil, error: this VM's heap (heap/census.h; no privileges)
 * add is called from the calling thread, at sync and at stop, for everything
 * recorded so far; trace sites come already described (reason, reasonId, ...)
 * with a count.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>
#include "check/check.h"
#include "heap/census.h"
#include "luajit/lj_target.h"
#include "base/output.h"
#include "base/privileges.h"
#include "channel/channel.h"
#include "session/wake.h"
#include "sampler/sampler.h"
#include "trace/trace.h"
#include "zones/zones.h"

#define ZONE_TICKS	100	/* a newly loaded zone module is looked for every second */
#define SESSION_MT	"nupp.profile.bpf.session"

/* A running session, of either kind, and the thread that drains it while the
 * script runs: stacks are symbolized, and abort locations read, while the
 * protos they name still exist. */
struct lsession {
	struct lj_target target;
	struct sampler *sampler;	/* a sample session, or */
	struct tracer *tracer;		/* a trace session */
	struct channel_set channels;	/* the one of the two it has */
	struct zones *zones;		/* this process's zone module, once loaded */
	pthread_t poller;
	pthread_mutex_t lock;		/* the poller and the calling thread */
	bool stopping, running;
	int add_ref;			/* registry ref of the add callback */
};

static int l_available(lua_State *L)
{
	const char *why = NULL;

	lua_pushboolean(L, privileges__bpf(&why));
	if (why) {
		lua_pushstring(L, why);
		return 2;
	}
	return 1;
}

/* This process's LuaJIT, with G(L) as its only VM. */
static int self_target(lua_State *L, struct lj_target *t, char *err, size_t errsz)
{
	if (lj_target__identify(t, getpid(), err, errsz))
		return -1;
	/* L->glref: at the same offset in every layout. */
	if (lj_target__adopt_vm(t, *(const __u64 *)((const char *)L + t->layout.L_glref))) {
		snprintf(err, errsz, "this LuaJIT's VM does not match the layout nupp-bpf has for it (%s)",
			 t->layout_why[0] ? t->layout_why : "no GG_State signature");
		return -1;
	}
	return 0;
}

/* A zone module loaded since the last look: the channel reads its paths. */
static void refresh_zones(struct lsession *s)
{
	if (zones__refresh(s->zones))
		channels__set_zones(&s->channels, &s->target, s->zones);
}

/* The poller: woken by the channels' events as the CLI's sessions are
 * (wake.h), and each tick for zones and the sampler's poll. */
static void *poll_loop(void *arg)
{
	struct lsession *s = arg;
	struct wake w = { .lock = &s->lock };

	for (unsigned tick = 1;; tick++) {
		pthread_mutex_lock(&s->lock);
		if (s->stopping) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		if (tick % ZONE_TICKS == 0)
			refresh_zones(s);
		if (tick % POLL_TICKS == 0)
			channels__poll(&s->channels);
		pthread_mutex_unlock(&s->lock);
		wake__wait(&w, &s->channels, TICK_MS / 1e3, NULL, NULL, NULL);
	}
}

static void stop_poller(struct lsession *s)
{
	if (!s->running)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->poller, NULL);
	s->running = false;
}

/* Detach and free everything; safe to call twice. */
static void session_close(struct lsession *s)
{
	stop_poller(s);
	channels__close(&s->channels);
	zones__free(s->zones);
	s->sampler = NULL;
	s->tracer = NULL;
	s->zones = NULL;
}

/* Call add(zone, stack, state, n) for everything sampled so far; an
 * allocation session's n is bytes, and its add gets the row's blocks, bytes
 * in use and blocks in use too, shared out by state as the bytes are. */
static void sample_emit(lua_State *L, struct lsession *s)
{
	static const char states[NUPP_ST_MAX] = { 'N', 'I', 'C', 'G', 'J' };
	struct profile p = {};
	struct sampler_stats st;

	if (sampler__collect(s->sampler, &p, &st)) {
		profile__free(&p);
		luaL_error(L, "nupp.profile: out of memory collecting samples");
	}
	for (size_t i = 0; i < p.nrows; i++)
		for (int k = 0; k < NUPP_ST_MAX; k++) {
			if (!p.rows[i].state[k])
				continue;
			lua_rawgeti(L, LUA_REGISTRYINDEX, s->add_ref);
			lua_pushstring(L, p.rows[i].zone);
			lua_pushstring(L, p.rows[i].stack);
			lua_pushlstring(L, &states[k], 1);
			lua_pushnumber(L, (lua_Number)p.rows[i].state[k]);
			if (p.measure == PROFILE_ALLOC) {
				double share = (double)p.rows[i].state[k] / profile_row__count(&p.rows[i]);

				lua_pushnumber(L, (lua_Number)(p.rows[i].alloc.objects * share));
				lua_pushnumber(L, (lua_Number)(p.rows[i].alloc.inuse_bytes * share));
				lua_pushnumber(L, (lua_Number)(p.rows[i].alloc.inuse_objects * share));
			}
			if (lua_pcall(L, p.measure == PROFILE_ALLOC ? 7 : 4, 0, 0)) {
				profile__free(&p);
				lua_error(L);
			}
		}
	profile__free(&p);
}

static void set_string(lua_State *L, const char *k, const char *v)
{
	lua_pushstring(L, v);
	lua_setfield(L, -2, k);
}

/* Call add(nil, nil, location, blacklisted, zone, count, desc) for every
 * site so far: the collector has described it with the catalog already. */
static void trace_emit(lua_State *L, struct lsession *s)
{
	struct trace_report rep;

	if (tracer__report(s->tracer, &rep))
		luaL_error(L, "nupp.profile: out of memory collecting trace aborts");
	for (size_t i = 0; i < rep.nsites; i++) {
		const struct trace_site *site = &rep.sites[i];
		bool bl = !strcmp(site->severity, "blacklist");

		lua_rawgeti(L, LUA_REGISTRYINDEX, s->add_ref);
		lua_pushnil(L);
		lua_pushnil(L);
		lua_pushstring(L, site->location);
		lua_pushboolean(L, bl);
		lua_pushstring(L, site->zone_path);
		lua_pushnumber(L, (lua_Number)site->count);
		lua_createtable(L, 0, 5);
		set_string(L, "reason", site->reason);
		set_string(L, "rawReason", site->raw_reason);
		set_string(L, "reasonId", site->reason_id);
		set_string(L, "reasonClass", site->reason_class);
		set_string(L, "severity", bl ? "warn" : site->severity);	/* the class's default */
		if (lua_pcall(L, 7, 0, 0)) {
			trace_report__free(&rep);
			lua_error(L);
		}
	}
	trace_report__free(&rep);
}

static void emit(lua_State *L, struct lsession *s)
{
	if (s->sampler)
		sample_emit(L, s);
	else if (s->tracer)
		trace_emit(L, s);
}

static struct lsession *upvalue_session(lua_State *L)
{
	return luaL_checkudata(L, lua_upvalueindex(1), SESSION_MT);
}

static void pause_session(struct lsession *s, bool paused)
{
	channels__pause(&s->channels, paused);
}

static int l_pause(lua_State *L)
{
	pause_session(upvalue_session(L), true);
	return 0;
}

static int l_resume(lua_State *L)
{
	pause_session(upvalue_session(L), false);
	return 0;
}

static int l_sync(lua_State *L)
{
	struct lsession *s = upvalue_session(L);

	pthread_mutex_lock(&s->lock);
	emit(L, s);	/* add() only counts: it does not raise */
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int l_stop(lua_State *L)
{
	struct lsession *s = upvalue_session(L);

	if (s->sampler)		/* the session's own teardown is not the program's */
		sampler__pause(s->sampler, true);
	stop_poller(s);
	emit(L, s);
	session_close(s);
	luaL_unref(L, LUA_REGISTRYINDEX, s->add_ref);
	s->add_ref = LUA_NOREF;
	return 0;
}

static int l_gc(lua_State *L)
{
	session_close(luaL_checkudata(L, 1, SESSION_MT));
	return 0;
}

/* A new session userdata for this process, its add callback taken from
 * stack index 2. Raises on failure. */
static struct lsession *session_new(lua_State *L)
{
	struct lsession *s;
	char err[512];

	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_checktype(L, 2, LUA_TFUNCTION);
	s = lua_newuserdata(L, sizeof(*s));
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->add_ref = LUA_NOREF;
	luaL_getmetatable(L, SESSION_MT);
	lua_setmetatable(L, -2);
	if (self_target(L, &s->target, err, sizeof(err)))
		luaL_error(L, "nupp.profile: %s", err);
	s->zones = zones__new(s->target.pid);
	if (!s->zones)
		luaL_error(L, "nupp.profile: out of memory");
	return s;
}

/* Start draining, and return {pause, resume, stop, sync} over the session at
 * the top of the stack. The session was opened paused: its probes count
 * nothing of the module's own start-up, and it listens from here on. */
static int session_start(lua_State *L, struct lsession *s)
{
	static const luaL_Reg methods[] = {
		{ "pause", l_pause }, { "resume", l_resume }, { "stop", l_stop },
		{ "sync", l_sync }, { NULL, NULL },
	};
	int ud = lua_gettop(L);

	refresh_zones(s);
	if (pthread_create(&s->poller, NULL, poll_loop, s)) {
		session_close(s);
		return luaL_error(L, "nupp.profile: cannot start the poller thread");
	}
	s->running = true;
	lua_pushvalue(L, 2);
	s->add_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_newtable(L);
	for (const luaL_Reg *m = methods; m->name; m++) {
		lua_pushvalue(L, ud);
		lua_pushcclosure(L, m->func, 1);
		lua_setfield(L, -2, m->name);
	}
	lua_pushvalue(L, ud);
	lua_setfield(L, -2, "_session");	/* keeps the userdata alive with the handle */
	pause_session(s, false);
	return 1;
}

static int opt_int(lua_State *L, int idx, const char *name, int def)
{
	int v;

	lua_getfield(L, idx, name);
	v = lua_isnil(L, -1) ? def : (int)lua_tointeger(L, -1);
	lua_pop(L, 1);
	return v;
}

static bool opt_bool(lua_State *L, int idx, const char *name)
{
	bool v;

	lua_getfield(L, idx, name);
	v = lua_toboolean(L, -1);
	lua_pop(L, 1);
	return v;
}

/* A sampling session of this process on the sampler opened with o (its
 * depth checked here). */
static int sampler_session(lua_State *L, struct sampler_opts *o)
{
	struct lsession *s;
	char err[512];

	if (o->depth < 1 || o->depth > NUPP_MAX_SHOWN)
		return luaL_error(L, "nupp.profile: stackDepth must be 1..%d", NUPP_MAX_SHOWN);
	s = session_new(L);
	s->sampler = sampler__open(o, err, sizeof(err));
	channels__add(&s->channels, sampler__channel(s->sampler));
	pause_session(s, true);		/* until session_start returns */
	if (s->zones)		/* a zone module loaded already: zones from the first sample */
		zones__refresh(s->zones);
	if (!s->sampler || channels__add_target(&s->channels, &s->target, s->zones, err, sizeof(err))) {
		session_close(s);
		return luaL_error(L, "nupp.profile: %s", err);
	}
	return session_start(L, s);
}

static int l_sample(lua_State *L)
{
	struct sampler_opts o = SAMPLER_OPTS_DEFAULT;

	luaL_checktype(L, 1, LUA_TTABLE);
	/* The API's stacks are as dumpstack renders them, C functions by address. */
	o.dumpstack_names = true;
	o.freq_hz = 0;		/* the script's interval instead */
	o.period_us = opt_int(L, 1, "intervalMs", 10) * 1000;
	o.depth = opt_int(L, 1, "stackDepth", 16);
	o.lines = opt_bool(L, 1, "lines");
	return sampler_session(L, &o);
}

/* Allocations of this process's VMs (record --alloc): opts {meanBytes,
 * stackDepth, lines}, validated by nupp.profile. */
static int l_alloc(lua_State *L)
{
	struct sampler_opts o = SAMPLER_OPTS_DEFAULT;

	luaL_checktype(L, 1, LUA_TTABLE);
	o.clock = SAMPLER_CLOCK_ALLOC;
	o.dumpstack_names = true;
	o.alloc_mean = opt_int(L, 1, "meanBytes", 512 * 1024);
	o.depth = opt_int(L, 1, "stackDepth", 16);
	o.lines = opt_bool(L, 1, "lines");
	return sampler_session(L, &o);
}

/* {luajitRevision, luajitVersion} of t, as the registry knows it. */
static void push_recorder(lua_State *L, const struct lj_target *t)
{
	struct trace_profile prof;

	trace_profile__fill(t, 0, &prof);
	lua_createtable(L, 0, 2);
	set_string(L, "luajitRevision", prof.luajit_revision);
	lua_pushnumber(L, (lua_Number)prof.luajit_version);
	lua_setfield(L, -2, "luajitVersion");
}

static int l_trace(lua_State *L)
{
	struct lsession *s;
	bool benign;
	char err[512];

	luaL_checktype(L, 1, LUA_TTABLE);
	lua_getfield(L, 1, "includeBenign");
	benign = lua_toboolean(L, -1);
	lua_pop(L, 1);
	s = session_new(L);
	s->tracer = tracer__open(&(struct tracer_opts){ .include_benign = benign }, err, sizeof(err));
	channels__add(&s->channels, tracer__channel(s->tracer));
	if (!s->tracer || channels__add_target(&s->channels, &s->target, s->zones, err, sizeof(err))) {
		session_close(s);
		return luaL_error(L, "nupp.profile: %s", err);
	}
	pause_session(s, true);		/* until session_start returns */
	session_start(L, s);
	push_recorder(L, &s->target);
	lua_setfield(L, -2, "recorder");
	return 1;
}

/* recorder() -> {luajitRevision, luajitVersion} of this process's LuaJIT as
 * the build registry knows it by content, or nil. Needs no privileges. */
static int l_recorder(lua_State *L)
{
	struct lj_target t;
	char err[512];

	if (lj_target__identify(&t, getpid(), err, sizeof(err)))
		return 0;
	push_recorder(L, &t);
	return 1;
}

/* check(dump, path) -> {AbortSite...} of a chunk dumped by string.dump in
 * this process, read against this process's LuaJIT recorder, or nil and a
 * one-line error. Needs no privileges. Each row has, besides the AbortSite
 * fields, the source's line, loopLine (0: none) and functionLine. */
static int l_check(lua_State *L)
{
	size_t len;
	const char *dump = luaL_checklstring(L, 1, &len), *path = luaL_optstring(L, 2, "");
	static struct lj_target t;	/* this process: identified once */
	static const struct lj_recorder *rec;
	static char why[512];
	struct check_ctx ctx;
	struct check_result r = { 0 };
	struct bc_chunk ch;
	char err[512];

	if (!rec && !why[0]) {
		if (lj_target__identify(&t, getpid(), err, sizeof(err)))
			snprintf(why, sizeof(why), "%s", err);
		else
			rec = lj_recorder__of(&t, why, sizeof(why));
	}
	if (!rec) {
		lua_pushnil(L);
		lua_pushstring(L, why);
		return 2;
	}
	if (check__ctx_init(&ctx, lj_target__build(&t), rec, err, sizeof(err)) ||
	    bcdump__parse(dump, len, &ch, err, sizeof(err))) {
		lua_pushnil(L);
		lua_pushstring(L, err);
		return 2;
	}
	if (check__chunk(&ctx, &ch, path, &r))
		snprintf(err, sizeof(err), "out of memory");
	bcdump__free(&ch);
	check__ctx_free(&ctx);
	lua_createtable(L, (int)r.n, 0);
	for (size_t i = 0; i < r.n; i++) {
		const struct check_finding *f = &r.f[i];

		lua_createtable(L, 0, 11);
		set_string(L, "severity", f->severity);
		lua_pushinteger(L, 1);
		lua_setfield(L, -2, "count");
		set_string(L, "reason", f->reason);
		set_string(L, "reasonId", f->reason_id);
		set_string(L, "reasonClass", f->row ? f->row->cls : TRACE_REASON_UNKNOWN_CLASS);
		set_string(L, "rawReason", f->raw);
		set_string(L, "location", f->location);
		set_string(L, "zonePath", "");
		lua_pushinteger(L, f->line);
		lua_setfield(L, -2, "line");
		lua_pushinteger(L, f->loop_line);
		lua_setfield(L, -2, "loopLine");
		lua_pushinteger(L, f->func_line);
		lua_setfield(L, -2, "functionLine");
		lua_rawseti(L, -2, (int)i + 1);
	}
	check__result_free(&r);
	return 1;
}

/* writefile(name, text) -> true, or nil and a one-line error: a report
 * written as the CLI writes its outputs (never through a symlink planted at
 * the name; an existing file kept as NAME.old). */
static int l_writefile(lua_State *L)
{
	size_t len;
	const char *name = luaL_checkstring(L, 1), *text = luaL_checklstring(L, 2, &len);
	struct output out;
	char err[PATH_MAX + 256];

	if (!*name) {		/* output__open takes "" for "no output" */
		snprintf(err, sizeof(err), "cannot write '': no file name");
		goto fail;
	}
	if (output__open(&out, name, err, sizeof(err)))
		goto fail;
	if (fwrite(text, 1, len, out.f) != len) {
		snprintf(err, sizeof(err), "cannot write %s: %s", name, strerror(errno));
		output__discard(&out);
		goto fail;
	}
	if (output__commit(&out, err, sizeof(err)))
		goto fail;
	lua_pushboolean(L, 1);
	return 1;
fail:
	lua_pushnil(L);
	lua_pushstring(L, err);
	return 2;
}

static void set_number(lua_State *L, const char *k, double v)
{
	lua_pushnumber(L, v);
	lua_setfield(L, -2, k);
}

/* heap() -> a census of this process's VM (the one that calls), as the CLI's
 * heap --json gives it, or nil and a one-line error. The process is read
 * while it stands in this call: nothing allocates meanwhile but this
 * thread, which is here. Needs no privileges: a process reads its own
 * memory. */
static int l_heap(lua_State *L)
{
	struct lj_target t;
	struct census *c = calloc(1, sizeof(*c));
	size_t *ranked;
	char err[512];

	if (!c || self_target(L, &t, err, sizeof(err)) ||
	    census__take(&t, *(const __u64 *)((const char *)L + t.layout.L_glref), c, err, sizeof(err))) {
		if (!c)
			snprintf(err, sizeof(err), "out of memory");
		free(c);
		lua_pushnil(L);
		lua_pushstring(L, err);
		return 2;
	}
	lua_createtable(L, 0, 12);
	set_number(L, "gcTotal", (double)c->gc_total);
	set_number(L, "counted", (double)census__counted(c));
	set_number(L, "vmBytes", (double)c->vm_bytes);
	set_number(L, "unreadable", (double)c->unreadable);
	set_number(L, "invalid", (double)c->invalid);
	lua_pushboolean(L, c->unreadable || c->invalid || c->cut);
	lua_setfield(L, -2, "partial");
	set_number(L, "seconds", c->seconds);
	lua_createtable(L, 0, HEAP_TYPES);
	for (int i = 0; i < HEAP_TYPES; i++) {
		lua_createtable(L, 0, 2);
		set_number(L, "objects", (double)c->type[i].objects);
		set_number(L, "bytes", (double)c->type[i].bytes);
		lua_setfield(L, -2, heap_type_names[i]);
	}
	lua_setfield(L, -2, "types");
	lua_createtable(L, c->ntables, 0);
	for (int i = 0; i < c->ntables; i++) {
		lua_createtable(L, 0, 3);
		set_number(L, "bytes", (double)c->tables[i].bytes);
		set_number(L, "arraySlots", c->tables[i].asize);
		set_number(L, "hashSlots", c->tables[i].hsize);
		set_string(L, "path", c->tables[i].path);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "largestTables");
	lua_createtable(L, c->nprotos, 0);
	for (int i = 0; i < c->nprotos; i++) {
		lua_createtable(L, 0, 3);
		set_number(L, "closures", (double)c->protos[i].closures);
		set_number(L, "bytes", (double)c->protos[i].bytes);
		set_string(L, "where", c->protos[i].where);
		set_string(L, "path", c->protos[i].path);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "closuresByPrototype");
	lua_createtable(L, c->nprefixes, 0);
	for (int i = 0; i < c->nprefixes; i++) {
		lua_createtable(L, 0, 3);
		set_number(L, "strings", (double)c->prefixes[i].strings);
		set_number(L, "bytes", (double)c->prefixes[i].bytes);
		set_string(L, "prefix", c->prefixes[i].text);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "stringsByPrefix");
	lua_createtable(L, (int)(c->paths.n < CENSUS_PATHS_KEPT ? c->paths.n : CENSUS_PATHS_KEPT), 0);
	if ((ranked = census__paths_ranked(c))) {
		for (size_t i = 0; i < c->paths.n && i < CENSUS_PATHS_KEPT; i++) {
			const struct path_group *g = &c->paths.g[ranked[i]];
			char path[CENSUS_PATH];

			path_groups__text(&c->paths, ranked[i], path, sizeof(path));
			lua_createtable(L, 0, 5);
			set_string(L, "path", path);
			set_number(L, "objects", (double)g->objects);
			set_number(L, "bytes", (double)g->bytes);
			set_number(L, "retainedObjects", (double)g->retained_objects);
			set_number(L, "retainedBytes", (double)g->retained);
			lua_rawseti(L, -2, (int)i + 1);
		}
		free(ranked);
	}
	lua_setfield(L, -2, "byPath");
	census__free(c);
	free(c);
	return 1;
}

int luaopen_nupp_profile_bpf(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{ "available", l_available }, { "sample", l_sample }, { "alloc", l_alloc },
		{ "trace", l_trace },
		{ "recorder", l_recorder }, { "writefile", l_writefile }, { "check", l_check },
		{ "heap", l_heap }, { NULL, NULL },
	};

	luaL_newmetatable(L, SESSION_MT);
	lua_pushcfunction(L, l_gc);
	lua_setfield(L, -2, "__gc");
	lua_pop(L, 1);
	lua_newtable(L);
	luaL_register(L, NULL, funcs);
	lua_pushliteral(L, "bpf");
	lua_setfield(L, -2, "name");
	return 1;
}
