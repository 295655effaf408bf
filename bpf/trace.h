/* SPDX-License-Identifier: MIT */
/* trace.h - records shared by trace.bpf.c and user/tracer.c. */
#ifndef NUPP_TRACE_H
#define NUPP_TRACE_H

#include "places.h"
#include "lj_layout.h"

#define NUPP_TRACE_FRAMES	4	/* frames captured from J->L->base-1 down */
#define NUPP_TRACE_MSG		128	/* bytes of a string error object kept */
#define NUPP_TRACE_MAX_VMS	16	/* global_States per process checked for J */

/* LuaJIT constants the abort site needs (lj_jit.h, lj_obj.h). */
#define LJ_TRACE_ERR		0x16	/* TraceState LJ_TRACE_ERR */
#define LJ_TISNUM		0xfffffff2U	/* itype below this is a double */
#define LJ_TSTR			0xfffffffbU	/* ~4u: GCstr */
#define LJ_TFUNC		0xfffffff7U	/* ~8u: GCfunc */

/* One frame of the recording thread, raw: userspace derives the abort
 * location the way the target's own trace_abort() does (it differs between
 * LuaJIT and OpenResty's luajit2). */
struct nupp_trace_frame {
	__u64 slot;	/* address of the frame's link slot (base - 1) */
	__u64 link;	/* frame_ftsz(): PC or delta | type */
	__u64 func;	/* frame_gc(): GCfunc * (or the thread for a dummy frame) */
	__u64 contpc;	/* frame_contpc() for a continuation frame, else 0 */
	__u8 ffid;	/* func->ffid: 0 Lua, 1 C, >1 builtin */
	__u8 pad[7];
};

/* One abort that trace_abort() reports with a vmevent, as seen at its
 * "if (traceno)" test: after penalty_pc()/blacklist_pc(), before the event. */
struct nupp_trace_event {
	__u32 pid;		/* tgid */
	__u32 tid;
	__u64 ktime;		/* bpf_ktime_get_ns() */
	__u64 J;		/* jit_State * (identifies the VM) */
	__u64 L;		/* J->L: the recording thread */
	__u64 errobj;		/* raw TValue L->top[-1]: TraceError (double) or error object */
	__u64 errinfo;		/* raw TValue J->errinfo */
	__u64 pt;		/* J->pt, 0 outside a Lua function */
	__u64 pc;		/* J->pc: the instruction being recorded */
	__u64 startpt;		/* J->cur.startpt */
	__u64 startpc;		/* J->cur.startpc */
	__u64 info_f;		/* errinfo is a C function: its lua_CFunction */
	__u32 startins;		/* J->cur.startins: the start instruction as it was */
	__u32 startins_now;	/* *startpc now: patched when this abort blacklisted */
	__u32 parent;		/* J->parent */
	__u32 exitno;		/* J->exitno */
	__u32 flags;		/* J->flags (JIT_F_*) */
	__u32 zone;		/* zone id open in the target, 0 none */
	__u16 traceno;		/* J->cur.traceno */
	__u8 info_ffid;		/* errinfo is a function: its ffid, else 0xff */
	__u8 nframes;		/* frames[] used */
	__u32 msglen;		/* string error object: its length (may exceed msg) */
	__u64 base;		/* J->L->base */
	struct nupp_trace_frame frames[NUPP_TRACE_FRAMES];
	char msg[NUPP_TRACE_MSG];	/* string error object's bytes */
};

/* Per target process, written by userspace at attach. */
struct nupp_trace_proc {
	struct lj_layout lj;
	__u64 zone_cur;		/* address of the target's u32 current zone id, 0 none */
};

/* Counters (per-CPU array, index enum nupp_trace_counter). */
enum nupp_trace_counter {
	NUPP_TRC_HITS,		/* probe hits of target processes */
	NUPP_TRC_NO_J,		/* no register held a valid jit_State */
	NUPP_TRC_NO_TRACE,	/* traceno 0: no vmevent, not counted */
	NUPP_TRC_READ,		/* target memory could not be read */
	NUPP_TRC_RB_FULL,	/* ring buffer full: event lost */
	NUPP_TRC_EVENTS,	/* events sent */
	NUPP_TRC_MAX,
};

#endif /* NUPP_TRACE_H */
