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
 * add is called at stop, from the calling thread, for everything recorded;
 * trace sites come already described (reason, reasonId, ...) with a count.
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
#include "lj_target.h"
#include "sampling.h"
#include "tracer.h"
#include "zones.h"

#define POLL_US 100000	/* symbolize new stacks this often */

/* A running sample session: the sampler, and a thread symbolizing while the
 * script runs (protos it samples may be collected before stop). */
struct lsample {
	struct lj_target target;
	struct sampler *sampler;
	struct zones *zones;	/* this process's zone module, once loaded */
	pthread_t poller;
	pthread_mutex_t lock;
	bool stopping, running;
	int add_ref;		/* registry ref of the add callback */
};

/* A running trace session, likewise drained by a thread: abort locations are
 * read from memory soon after the abort. */
struct ltrace {
	struct lj_target target;
	struct tracer *tracer;
	struct zones *zones;
	pthread_t poller;
	pthread_mutex_t lock;
	bool stopping, running;
	int add_ref;
};

static bool have_privileges(const char **why)
{
	char line[256];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "CapEff: %llx", &eff) == 1)
				break;
		fclose(f);
	}
	if (!((eff >> 21 & 1) || ((eff >> 39 & 1) && (eff >> 38 & 1)))) {
		*why = "BPF needs root (or CAP_BPF and CAP_PERFMON)";
		return false;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		*why = "the kernel has no BTF (/sys/kernel/btf/vmlinux)";
		return false;
	}
	return true;
}

static int l_available(lua_State *L)
{
	const char *why = NULL;

	lua_pushboolean(L, have_privileges(&why));
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
	/* L->glref: read through the registry layout, as from outside. */
	t->gs[0] = *(const __u64 *)((const char *)L + t->layout.L_glref);
	t->ngs = 1;
	return 0;
}

static int opt_int(lua_State *L, int idx, const char *name, int def)
{
	int v;

	lua_getfield(L, idx, name);
	v = lua_isnil(L, -1) ? def : (int)lua_tointeger(L, -1);
	lua_pop(L, 1);
	return v;
}

static void *poll_loop(void *arg)
{
	struct lsample *s = arg;

	for (unsigned n = 0;; n++) {
		pthread_mutex_lock(&s->lock);
		if (s->stopping) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		if (n % 10 == 0 && zones__refresh(s->zones))	/* zone module loaded */
			sampler__set_zones(s->sampler, s->target.pid, s->zones);
		sampler__poll(s->sampler);
		pthread_mutex_unlock(&s->lock);
		usleep(POLL_US);
	}
}

static struct lsample *check_sample(lua_State *L)
{
	return luaL_checkudata(L, lua_upvalueindex(1), "nupp.profile.bpf.sample");
}

static int l_sample_pause(lua_State *L)
{
	struct lsample *s = check_sample(L);

	if (s->sampler)
		sampler__pause(s->sampler, true);
	return 0;
}

static int l_sample_resume(lua_State *L)
{
	struct lsample *s = check_sample(L);

	if (s->sampler)
		sampler__pause(s->sampler, false);
	return 0;
}

static void stop_poller(struct lsample *s)
{
	if (!s->running)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->poller, NULL);
	s->running = false;
}

/* Stop sampling and close the session; safe to call twice. */
static void sample_close(struct lsample *s)
{
	stop_poller(s);
	sampler__close(s->sampler);
	s->sampler = NULL;
	zones__free(s->zones);
	s->zones = NULL;
}

/* Call add(zone, stack, state, n) for everything sampled so far. */
static int sample_emit(lua_State *L, struct lsample *s)
{
	static const char states[NUPP_ST_MAX] = { 'N', 'I', 'C', 'G', 'J' };
	struct profile p = {};
	struct sampler_stats st;
	int ret = sampler__collect(s->sampler, &p, &st);

	if (ret) {
		profile__free(&p);
		return luaL_error(L, "nupp.profile: collecting samples failed: %s", strerror(-ret));
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
			if (lua_pcall(L, 4, 0, 0)) {
				profile__free(&p);
				return lua_error(L);
			}
		}
	profile__free(&p);
	return 0;
}

static int l_sample_sync(lua_State *L)
{
	struct lsample *s = check_sample(L);

	if (!s->sampler)
		return 0;
	pthread_mutex_lock(&s->lock);
	sample_emit(L, s);	/* add() does not raise: it only counts */
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int l_sample_stop(lua_State *L)
{
	struct lsample *s = check_sample(L);

	if (!s->sampler)
		return 0;
	stop_poller(s);
	sample_emit(L, s);
	sample_close(s);
	luaL_unref(L, LUA_REGISTRYINDEX, s->add_ref);
	return 0;
}

static int l_sample_gc(lua_State *L)
{
	sample_close(luaL_checkudata(L, 1, "nupp.profile.bpf.sample"));
	return 0;
}

/* {name = closure over the userdata at the top of the stack} for each method. */
static void push_handle(lua_State *L, const luaL_Reg *methods)
{
	int ud = lua_gettop(L);

	lua_newtable(L);
	for (; methods->name; methods++) {
		lua_pushvalue(L, ud);
		lua_pushcclosure(L, methods->func, 1);
		lua_setfield(L, -2, methods->name);
	}
	lua_pushvalue(L, ud);
	lua_setfield(L, -2, "_state");	/* keeps the userdata alive with the handle */
}

static int l_sample(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "pause", l_sample_pause }, { "resume", l_sample_resume },
		{ "stop", l_sample_stop }, { "sync", l_sample_sync }, { NULL, NULL },
	};
	struct sampler_opts o = { .clock = SAMPLER_CLOCK_CPU, .max_stacks = 65536 };
	struct lsample *s;
	char err[512];

	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_checktype(L, 2, LUA_TFUNCTION);
	o.period_us = opt_int(L, 1, "intervalMs", 10) * 1000;
	o.depth = opt_int(L, 1, "stackDepth", 16);
	if (o.depth < 1 || o.depth > NUPP_MAX_SHOWN)
		return luaL_error(L, "nupp.profile: stackDepth must be 1..%d", NUPP_MAX_SHOWN);
	s = lua_newuserdata(L, sizeof(*s));
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->add_ref = LUA_NOREF;
	luaL_getmetatable(L, "nupp.profile.bpf.sample");
	lua_setmetatable(L, -2);
	if (self_target(L, &s->target, err, sizeof(err)))
		return luaL_error(L, "nupp.profile: %s", err);
	s->sampler = sampler__open(&o, err, sizeof(err));
	if (!s->sampler)
		return luaL_error(L, "nupp.profile: %s", err);
	s->zones = zones__new(s->target.pid);
	if (!s->zones || sampler__add_target(s->sampler, &s->target, err, sizeof(err))) {
		sample_close(s);
		return luaL_error(L, "nupp.profile: %s", s->zones ? err : "out of memory");
	}
	if (zones__refresh(s->zones))
		sampler__set_zones(s->sampler, s->target.pid, s->zones);
	if (pthread_create(&s->poller, NULL, poll_loop, s)) {
		sample_close(s);
		return luaL_error(L, "nupp.profile: cannot start the poller thread");
	}
	s->running = true;
	lua_pushvalue(L, 2);
	s->add_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	push_handle(L, methods);
	return 1;
}

/* ------------------------------------------------------------------------- */

static void *trace_loop(void *arg)
{
	struct ltrace *t = arg;

	for (unsigned n = 0;; n++) {
		pthread_mutex_lock(&t->lock);
		if (t->stopping) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		if (n % 100 == 0 && zones__refresh(t->zones))
			tracer__set_zone_state(t->tracer, t->target.pid, zones__state_addr(t->zones));
		tracer__poll(t->tracer, 0);
		pthread_mutex_unlock(&t->lock);
		usleep(10000);
	}
}

static void trace_stop_poller(struct ltrace *t)
{
	if (!t->running)
		return;
	pthread_mutex_lock(&t->lock);
	t->stopping = true;
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->poller, NULL);
	t->running = false;
}

static void trace_close(struct ltrace *t)
{
	trace_stop_poller(t);
	tracer__close(t->tracer);
	t->tracer = NULL;
	zones__free(t->zones);
	t->zones = NULL;
}

static struct ltrace *check_trace(lua_State *L)
{
	return luaL_checkudata(L, lua_upvalueindex(1), "nupp.profile.bpf.trace");
}

static int l_trace_pause(lua_State *L)
{
	struct ltrace *t = check_trace(L);

	if (t->tracer)
		tracer__pause(t->tracer, true);
	return 0;
}

static int l_trace_resume(lua_State *L)
{
	struct ltrace *t = check_trace(L);

	if (t->tracer)
		tracer__pause(t->tracer, false);
	return 0;
}

/* Hand every site so far to add(nil, nil, location, blacklisted, zone,
 * count, desc): the collector has already described it with the catalog. */
static int trace_emit(lua_State *L, struct ltrace *t)
{
	struct trace_report rep;

	if (tracer__report(t->tracer, &rep))
		return luaL_error(L, "nupp.profile: out of memory collecting trace aborts");
	for (size_t i = 0; i < rep.nsites; i++) {
		const struct trace_site *site = &rep.sites[i];
		bool bl = !strcmp(site->severity, "blacklist");

		lua_rawgeti(L, LUA_REGISTRYINDEX, t->add_ref);
		lua_pushnil(L);
		lua_pushnil(L);
		lua_pushstring(L, site->location);
		lua_pushboolean(L, bl);
		lua_pushstring(L, site->zone_path);
		lua_pushnumber(L, (lua_Number)site->count);
		lua_createtable(L, 0, 5);
		lua_pushstring(L, site->reason);
		lua_setfield(L, -2, "reason");
		lua_pushstring(L, site->raw_reason);
		lua_setfield(L, -2, "rawReason");
		lua_pushstring(L, site->reason_id);
		lua_setfield(L, -2, "reasonId");
		lua_pushstring(L, site->reason_class);
		lua_setfield(L, -2, "reasonClass");
		lua_pushstring(L, bl ? "warn" : site->severity);	/* the class's default */
		lua_setfield(L, -2, "severity");
		if (lua_pcall(L, 7, 0, 0)) {
			trace_report__free(&rep);
			return lua_error(L);
		}
	}
	trace_report__free(&rep);
	return 0;
}

static int l_trace_sync(lua_State *L)
{
	struct ltrace *t = check_trace(L);

	if (!t->tracer)
		return 0;
	pthread_mutex_lock(&t->lock);
	trace_emit(L, t);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static int l_trace_stop(lua_State *L)
{
	struct ltrace *t = check_trace(L);

	if (!t->tracer)
		return 0;
	trace_stop_poller(t);
	trace_emit(L, t);
	trace_close(t);
	luaL_unref(L, LUA_REGISTRYINDEX, t->add_ref);
	return 0;
}

static int l_trace_gc(lua_State *L)
{
	trace_close(luaL_checkudata(L, 1, "nupp.profile.bpf.trace"));
	return 0;
}

static int l_trace(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "pause", l_trace_pause }, { "resume", l_trace_resume },
		{ "stop", l_trace_stop }, { "sync", l_trace_sync }, { NULL, NULL },
	};
	struct trace_profile prof;
	struct ltrace *t;
	bool benign;
	char err[512];

	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_checktype(L, 2, LUA_TFUNCTION);
	lua_getfield(L, 1, "includeBenign");
	benign = lua_toboolean(L, -1);
	lua_pop(L, 1);
	t = lua_newuserdata(L, sizeof(*t));
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	t->add_ref = LUA_NOREF;
	luaL_getmetatable(L, "nupp.profile.bpf.trace");
	lua_setmetatable(L, -2);
	if (self_target(L, &t->target, err, sizeof(err)))
		return luaL_error(L, "nupp.profile: %s", err);
	t->tracer = tracer__open(&t->target, 1, benign, err, sizeof(err));
	if (!t->tracer)
		return luaL_error(L, "nupp.profile: %s", err);
	t->zones = zones__new(t->target.pid);
	if (t->zones && zones__refresh(t->zones))
		tracer__set_zone_state(t->tracer, t->target.pid, zones__state_addr(t->zones));
	if (pthread_create(&t->poller, NULL, trace_loop, t)) {
		trace_close(t);
		return luaL_error(L, "nupp.profile: cannot start the poller thread");
	}
	t->running = true;
	lua_pushvalue(L, 2);
	t->add_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	push_handle(L, methods);
	/* The recorder as the registry knows it, for TraceProfile. */
	tracer__profile(&t->target, 0, &prof);
	lua_createtable(L, 0, 2);
	lua_pushstring(L, prof.luajit_revision);
	lua_setfield(L, -2, "luajitRevision");
	lua_pushnumber(L, (lua_Number)prof.luajit_version);
	lua_setfield(L, -2, "luajitVersion");
	lua_setfield(L, -2, "recorder");
	return 1;
}

/* recorder() -> {luajitRevision, luajitVersion} of this process's LuaJIT as
 * the build registry knows it by content, or nil. Needs no privileges. */
static int l_recorder(lua_State *L)
{
	struct trace_profile prof;
	struct lj_target t;
	char err[512];

	if (lj_target__identify(&t, getpid(), err, sizeof(err)))
		return 0;
	tracer__profile(&t, 0, &prof);
	lua_createtable(L, 0, 2);
	lua_pushstring(L, prof.luajit_revision);
	lua_setfield(L, -2, "luajitRevision");
	lua_pushnumber(L, (lua_Number)prof.luajit_version);
	lua_setfield(L, -2, "luajitVersion");
	return 1;
}

int luaopen_nupp_profile_bpf(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{ "available", l_available }, { "sample", l_sample }, { "trace", l_trace },
		{ "recorder", l_recorder }, { NULL, NULL },
	};

	luaL_newmetatable(L, "nupp.profile.bpf.sample");
	lua_pushcfunction(L, l_sample_gc);
	lua_setfield(L, -2, "__gc");
	lua_pop(L, 1);
	luaL_newmetatable(L, "nupp.profile.bpf.trace");
	lua_pushcfunction(L, l_trace_gc);
	lua_setfield(L, -2, "__gc");
	lua_pop(L, 1);
	lua_newtable(L);
	luaL_register(L, NULL, funcs);
	lua_pushliteral(L, "bpf");
	lua_setfield(L, -2, "name");
	return 1;
}
