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
 *	sample({intervalMs, stackDepth}, add) -> {pause, resume, stop}
 *	trace({includeBenign}, add) -> {pause, resume, stop}
 * add is called at stop, from the calling thread, for everything recorded.
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

#define POLL_US 100000	/* symbolize new stacks this often */

/* A running sample session: the sampler, and a thread symbolizing while the
 * script runs (protos it samples may be collected before stop). */
struct lsample {
	struct lj_target target;
	struct sampler *sampler;
	pthread_t poller;
	pthread_mutex_t lock;
	bool stopping, running;
	int add_ref;		/* registry ref of the add callback */
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

	for (;;) {
		pthread_mutex_lock(&s->lock);
		if (s->stopping) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
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
}

static int l_sample_stop(lua_State *L)
{
	static const char states[NUPP_ST_MAX] = { 'N', 'I', 'C', 'G', 'J' };
	struct lsample *s = check_sample(L);
	struct profile p = {};
	struct sampler_stats st;
	int ret;

	if (!s->sampler)
		return 0;
	stop_poller(s);
	ret = sampler__collect(s->sampler, &p, &st);
	sample_close(s);
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
		{ "stop", l_sample_stop }, { NULL, NULL },
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
	if (sampler__add_target(s->sampler, &s->target, err, sizeof(err))) {
		sample_close(s);
		return luaL_error(L, "nupp.profile: %s", err);
	}
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

int luaopen_nupp_profile_bpf(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{ "available", l_available }, { "sample", l_sample }, { NULL, NULL },
	};

	luaL_newmetatable(L, "nupp.profile.bpf.sample");
	lua_pushcfunction(L, l_sample_gc);
	lua_setfield(L, -2, "__gc");
	lua_pop(L, 1);
	lua_newtable(L);
	luaL_register(L, NULL, funcs);
	lua_pushliteral(L, "bpf");
	lua_setfield(L, -2, "name");
	return 1;
}
