/* SPDX-License-Identifier: MIT */
/*
 * luahost - a minimal C program embedding LuaJIT, for tests.
 *
 *   luahost SCRIPT [--threads N [--busy-main]] [--event-loop] [--host-alloc] [ARG...]
 *
 * Runs SCRIPT in a fresh lua_State with the standard libraries. With
 * --threads N it runs the script in N independent lua_States, one per
 * pthread, all at once. Each VM gets the global THREAD_INDEX (1..N; 1 without
 * --threads) and the usual `arg` table (arg[0] = SCRIPT, then ARG...). Exit
 * status is 1 if any run failed; the error and traceback go to stderr.
 * With --busy-main the main thread, in no VM, spins in C until the threads
 * are done, as a host's own thread would work beside its Lua threads, then
 * prints "main tid TID cpu SECONDS" (its own CPU time).
 *
 * With --event-loop the script runs as a coroutine of its VM, resumed by
 * the host from C (lua_resume) as an event loop resumes a request's
 * coroutine (OpenResty's): the global host_wait(MS) yields from C
 * (lua_yield), the host sleeps MS milliseconds, as a loop waits in
 * epoll_wait for what the coroutine waits on, and resumes it; with
 * LUAHOST_SPIN=1 in the environment it spins in C meanwhile instead, as a
 * loop busy with other requests (spin_in_loop).
 *
 * With --host-alloc each VM allocates through the host's own function
 * (lua_newstate(host_alloc, ...): realloc and free of the C library), as
 * an embedder that counts or pools its memory does, not LuaJIT's
 * allocator: a function in this file, not in LuaJIT's.
 *
 * Every VM also gets host_decoy(SECONDS), which spins in C for SECONDS of
 * the thread's CPU time with r14 naming a decoy global_State (below).
 *
 * Links against libluajit-5.1.so.2, so LD_LIBRARY_PATH selects the LuaJIT
 * build (e.g. build/stock/luajit2/usr/lib/x86_64-linux-gnu).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

struct run {
	pthread_t tid;
	int index;		/* THREAD_INDEX, 1-based */
	int status;		/* 0 ok, 1 error */
};

static const char *script;
static int runs_done;		/* threads whose run ended (atomic) */
static int event_loop;		/* --event-loop */
static char **script_args;
static int nscript_args;

static int traceback(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);

	if (!msg)
		msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
	lua_getglobal(L, "debug");
	lua_getfield(L, -1, "traceback");
	lua_pushstring(L, msg);
	lua_pushinteger(L, 2);
	lua_call(L, 2, 1);
	return 1;
}

/* host_wait(MS): the coroutine yields to the host until MS ms from now
 * (its deadline, in the VM's registry). */
static int host_wait(lua_State *L)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	lua_pushnumber(L, now.tv_sec + now.tv_nsec / 1e9 + luaL_checknumber(L, 1) / 1e3);
	lua_setfield(L, LUA_REGISTRYINDEX, "host_wait_until");
	return lua_yield(L, 0);
}

/* The event loop's own work while the coroutine waits: C code of the host,
 * outside Lua, until the deadline. */
static __attribute__((noinline)) void spin_in_loop(const struct timespec *until)
{
	struct timespec now;
	volatile unsigned long sink = 0;

	do {
		for (int i = 0; i < 10000; i++)
			sink += (unsigned long)i * 7 % 13;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < until->tv_sec ||
		 (now.tv_sec == until->tv_sec && now.tv_nsec < until->tv_nsec));
}

/* The host's loop: resume the script's coroutine, which is on top of L's
 * stack with its function, until it ends; when it yields, sleep until its
 * deadline. 0, or an error on top of L. */
static int run_event_loop(lua_State *L)
{
	lua_State *co = lua_newthread(L);
	int status;

	lua_insert(L, -2);			/* the thread below its function */
	lua_xmove(L, co, 1);
	while ((status = lua_resume(co, 0)) == LUA_YIELD) {
		struct timespec until;
		double t;

		lua_getfield(L, LUA_REGISTRYINDEX, "host_wait_until");
		t = lua_tonumber(L, -1);
		lua_pop(L, 1);
		until.tv_sec = (time_t)t;
		until.tv_nsec = (long)((t - until.tv_sec) * 1e9);
		if (getenv("LUAHOST_SPIN"))
			spin_in_loop(&until);
		else
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL))
				;
	}
	if (status) {
		lua_xmove(co, L, 1);		/* the error */
		return status;
	}
	lua_pop(L, 1);				/* the thread */
	return 0;
}

/*
 * host_decoy(SECONDS): C code that uses r14 for its own ends, as C code may
 * (the register is callee-saved, not reserved): a sampler that reads r14 as
 * LuaJIT's DISPATCH finds r14 + GG_DISP2G there, here a decoy global_State
 * made of two heap words that point at each other as g->mainthref and its
 * main thread's glref do, but no GG_State (its main lua_State is not at its
 * start). The decoy is built from the running VM (GC64: L->glref at 16):
 * DISPATCH is r14 as the VM called the function (host_decoy takes it before
 * any C code runs), g is G(L), and mainthref the first word of g holding L.
 * Spins for SECONDS of the thread's CPU time with r14 on the decoy.
 */
int host_decoy_c(lua_State *L, unsigned long dispatch);
__asm__(".text\n"
	".globl host_decoy\n"
	".type host_decoy, @function\n"
	"host_decoy:\n"
	"\tmov %r14, %rsi\n"
	"\tjmp host_decoy_c\n"
	".size host_decoy, .-host_decoy\n");
int host_decoy(lua_State *L);

static double thread_cpu(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) int host_decoy_c(lua_State *L, unsigned long dispatch)
{
	const unsigned long mask = (1UL << 47) - 1;
	double until = thread_cpu() + luaL_checknumber(L, 1);
	unsigned long g = *(unsigned long *)((char *)L + 16) & mask, x, m, decoy;
	unsigned long *words = calloc(2048, sizeof(*words));
	size_t k;

	for (k = 0; k < 1024; k += 8)
		if ((*(unsigned long *)(g + k) & mask) == (unsigned long)L)
			break;
	if (!words || k == 1024)
		return luaL_error(L, "host_decoy: no main thread in G(L)'s first 1 KiB");
	x = (unsigned long)(words + 256);		/* the decoy g */
	m = (unsigned long)(words + 1536);		/* its "main thread" */
	*(unsigned long *)(x + k) = m;
	*(unsigned long *)(m + 16) = x;
	decoy = x - (g - dispatch);
	while (thread_cpu() < until) {
		unsigned long n = 1000000;

		__asm__ volatile("mov %1, %%r14\n"
				 "1:\tdec %0\n"
				 "\tjnz 1b\n"
				 : "+r"(n) : "r"(decoy) : "r14", "cc");
	}
	free(words);
	return 0;
}

static int host_alloc_on;

/* lua_Alloc: the host's allocator (--host-alloc). Not inlined: the VM
 * calls it through g->allocf. */
static __attribute__((noinline)) void *host_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	(void)ud;
	(void)osize;
	if (nsize == 0) {
		free(ptr);
		return NULL;
	}
	return realloc(ptr, nsize);
}

static void *run_script(void *arg)
{
	struct run *r = arg;
	lua_State *L = host_alloc_on ? lua_newstate(host_alloc, NULL) : luaL_newstate();
	int i;

	if (!L) {
		fprintf(stderr, "luahost: thread %d: cannot create a lua_State\n", r->index);
		r->status = 1;
		return NULL;
	}
	luaL_openlibs(L);
	lua_pushinteger(L, r->index);
	lua_setglobal(L, "THREAD_INDEX");
	lua_createtable(L, nscript_args, 1);
	lua_pushstring(L, script);
	lua_rawseti(L, -2, 0);
	for (i = 0; i < nscript_args; i++) {
		lua_pushstring(L, script_args[i]);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setglobal(L, "arg");

	lua_pushcfunction(L, host_wait);
	lua_setglobal(L, "host_wait");
	lua_pushcfunction(L, host_decoy);
	lua_setglobal(L, "host_decoy");

	lua_pushcfunction(L, traceback);
	if (luaL_loadfile(L, script) != 0 ||
	    (event_loop ? run_event_loop(L) : lua_pcall(L, 0, 0, -2)) != 0) {
		const char *msg = lua_tostring(L, -1);

		fprintf(stderr, "luahost: thread %d: %s\n", r->index, msg ? msg : "(no message)");
		r->status = 1;
	}
	lua_close(L);
	__atomic_add_fetch(&runs_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: luahost SCRIPT [--threads N [--busy-main]] [--event-loop] "
		"[--host-alloc] [ARG...]\n");
	exit(2);
}

/* The host's own work, in no VM: spin until n runs are done. */
static __attribute__((noinline)) void spin_in_c(int n)
{
	volatile unsigned long sink = 0;
	struct timespec cpu;

	while (__atomic_load_n(&runs_done, __ATOMIC_ACQUIRE) < n)
		for (int i = 0; i < 100000; i++)
			sink += (unsigned long)i * 7 % 13;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
	printf("main tid %d cpu %.3f\n", (int)gettid(), cpu.tv_sec + cpu.tv_nsec / 1e9);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct run *runs;
	int nthreads = 0, busy_main = 0, i, status = 0;
	char **rest;
	int nrest = 0;

	if (argc < 2 || argv[1][0] == '-')
		usage();
	script = argv[1];
	rest = calloc(argc, sizeof(*rest));
	if (!rest)
		return 1;
	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
			char *end;

			nthreads = (int)strtol(argv[++i], &end, 10);
			if (*end || nthreads < 1 || nthreads > 1024)
				usage();
		} else if (strcmp(argv[i], "--busy-main") == 0) {
			busy_main = 1;
		} else if (strcmp(argv[i], "--event-loop") == 0) {
			event_loop = 1;
		} else if (strcmp(argv[i], "--host-alloc") == 0) {
			host_alloc_on = 1;
		} else {
			rest[nrest++] = argv[i];
		}
	}
	script_args = rest;
	nscript_args = nrest;

	if (busy_main && !nthreads)
		usage();
	if (nthreads == 0) {		/* plain run on the main thread */
		struct run r = { .index = 1 };

		run_script(&r);
		return r.status;
	}

	runs = calloc(nthreads, sizeof(*runs));
	if (!runs)
		return 1;
	for (i = 0; i < nthreads; i++) {
		runs[i].index = i + 1;
		if (pthread_create(&runs[i].tid, NULL, run_script, &runs[i]) != 0) {
			fprintf(stderr, "luahost: pthread_create failed\n");
			return 1;
		}
	}
	if (busy_main)
		spin_in_c(nthreads);
	for (i = 0; i < nthreads; i++) {
		pthread_join(runs[i].tid, NULL);
		status |= runs[i].status;
	}
	free(runs);
	free(rest);
	return status;
}
