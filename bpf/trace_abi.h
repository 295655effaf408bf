/* SPDX-License-Identifier: MIT */
/* trace_abi.h - the records trace.bpf.c and the collector (user/trace/) share. */
#ifndef NUPP_TRACE_ABI_H
#define NUPP_TRACE_ABI_H

#include "places.h"
#include "lj_layout.h"

#define NUPP_TRACE_WALK		16	/* frames searched from J->L->base-1 down */
#define NUPP_TRACE_NAME		256	/* bytes of the location's chunk name kept */
#define NUPP_TRACE_MSG		128	/* bytes of a string error object kept */
#define NUPP_TRACE_MAX_VMS	16	/* global_States per process checked for J */
/* Blocks of target memory the probe reads at once (each read costs
 * 0.1-0.5 us, whatever its size): jit_State's fields in two (the current
 * trace's and the recorder's; the parent, exit and errinfo), the recording
 * lua_State's, the location's GCproto header. Powers of two. */
#define NUPP_TJ_BLK		256
#define NUPP_TL_BLK		64
#define NUPP_TPT_BLK		128
#define NUPP_TFN_BLK		64	/* a GCfunc's header: ffid, pc, f */
#define NUPP_TSTR_BLK		512	/* a GCstr's header and the chunk name kept */

/* LuaJIT constants the abort site needs (lj_jit.h, lj_obj.h). */
#define LJ_TRACE_ERR		0x16	/* TraceState LJ_TRACE_ERR */
#define LJ_TISNUM		0xfffffff2U	/* itype below this is a double */
#define LJ_TSTR			0xfffffffbU	/* ~4u: GCstr */
#define LJ_TFUNC		0xfffffff7U	/* ~8u: GCfunc */

/* The function and position the "abort" vmevent carries, and what naming
 * it needs (jit.util.funcinfo(fn, pos).loc, a builtin's ffid, a C
 * function's address), captured while the target lives: the function may
 * be collected, or the process gone, before userspace reads the event. */
struct nupp_trace_loc {
	__u64 frame;		/* its frame's link slot (the walk's place, while it runs) */
	__u64 pc;		/* the pc pos is of, in LuaJIT's search (likewise) */
	__u64 fn;		/* GCfunc * */
	__u64 pt;		/* its GCproto (Lua function), else 0 */
	__u64 f;		/* its lua_CFunction (builtin or C function) */
	__s32 pos;		/* the vmevent's pos (an int, as setintV() stores it) */
	__s32 line;		/* lj_debug_line(pt, pos) */
	__s32 firstline;	/* pt->firstline */
	__u32 namelen;		/* chunk name length */
	__u8 ffid;		/* 0 Lua, 1 C, >1 builtin */
	__u8 have;		/* NUPP_LOC_* */
	char name0;		/* the chunk name's first character */
	__u8 pad[5];
	/* The chunk name, or its last NUPP_TRACE_NAME bytes when longer (a
	 * file name, "@path/file.lua", is named by its end). */
	char name[NUPP_TRACE_NAME];
};

#define NUPP_LOC_FN	1	/* fn, ffid, pos (and f when not Lua) */
#define NUPP_LOC_PROTO	2	/* pt, firstline, line */
#define NUPP_LOC_NAME	4	/* namelen, name0, name */

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
	__u64 info_f;		/* errinfo is a builtin or C function: its lua_CFunction */
	__u32 startins;		/* J->cur.startins: the start instruction as it was */
	__u32 startins_now;	/* *startpc now: patched when this abort blacklisted */
	__u32 parent;		/* J->parent */
	__u32 exitno;		/* J->exitno */
	__u32 flags;		/* J->flags (JIT_F_*) */
	__u32 zone;		/* zone id open in the target, 0 none */
	__u16 traceno;		/* J->cur.traceno */
	__u8 info_ffid;		/* errinfo is a function: its ffid, else 0xff */
	__u8 pad;
	__u32 msglen;		/* string error object: its length (may exceed msg) */
	struct nupp_trace_loc loc;	/* the location, found as the target finds it */
	char msg[NUPP_TRACE_MSG];	/* string error object's bytes */
};

/* Per target process, written by userspace at attach. */
struct nupp_trace_proc {
	struct lj_layout lj;
	__u64 zone_cur;		/* address of the target's u32 current zone id, 0 none */
	__u64 last_J;		/* the jit_State the last abort found (the probe's own
				 * note: one validated needs no read again) */
	__u32 debug_frame;	/* trace_abort() names lj_debug_frame(L, 0) (luajit2
				 * 2019-02..2023-10), not the first Lua frame */
	/* The blocks the probe reads (userspace fits them to the layout):
	 * [J + j_lo, + j_lo_len) holds lj.J_cur_*, J_L, J_pc, J_pt, J_flags;
	 * [J + j_hi, + j_hi_len) J_parent, J_exitno, J_errinfo, each at most
	 * NUPP_TJ_BLK; [L + L_blk, + L_len) L_base, L_top, L_stack (at most
	 * NUPP_TL_BLK); a GCproto's first pt_len bytes its line info and
	 * chunk name (at most NUPP_TPT_BLK); a GCfunc's first fn_len its
	 * ffid, pc and f (at most NUPP_TFN_BLK). */
	__u32 j_lo, j_lo_len, j_hi, j_hi_len;
	__u32 L_blk, L_len, pt_len, fn_len;
	__u32 j_reg;		/* the register that held J at the last abort (the
				 * probe's own note; index into find_J's list) */
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

#endif /* NUPP_TRACE_ABI_H */
