/* SPDX-License-Identifier: MIT */
/*
 * lj_layout.h - the memory layout of one LuaJIT build, as data.
 *
 * Shared by the BPF programs and userspace. Nothing here is a LuaJIT constant:
 * every value is filled in by userspace from the build registry (generated from
 * real rebuilds, see scripts/gen-registry.py) and verified against the target
 * at attach time (user/lj_target.c). Only x86-64 GC64 builds are supported
 * (LJ_GC64 = LJ_FR2 = 1): 8-byte TValues, GC refs are 47-bit pointers.
 */
#ifndef NUPP_LJ_LAYOUT_H
#define NUPP_LJ_LAYOUT_H

#define LJ_GCVMASK	0x7fffffffffffULL	/* GC64: pointer bits of a TValue */
#define LJ_FRAME_TYPE	3			/* frame link: FRAME_TYPE mask */
#define LJ_FRAME_TYPEP	7			/* frame link: FRAME_TYPEP mask */
#define LJ_FRAME_LUA	0
#define LJ_FRAME_C	1
#define LJ_FRAME_CONT	2
#define LJ_FRAME_VARG	3

/* g->vmstate holds ~LJ_VMST_x, or a trace number (>= 0) while on trace. */
#define LJ_VMST_INTERP	(-1)
#define LJ_VMST_C	(-2)
#define LJ_VMST_GC	(-3)
#define LJ_VMST_EXIT	(-4)
#define LJ_VMST_RECORD	(-5)
#define LJ_VMST_OPT	(-6)
#define LJ_VMST_ASM	(-7)

struct lj_layout {
	/* GG_State: one allocation holding the main lua_State, g, J, dispatch */
	__u32 gg_g;		/* offsetof(GG_State, g) == sizeof(lua_State) */
	__u32 gg_j;		/* offsetof(GG_State, J) */
	__s32 disp2g;		/* GG_DISP2G: g = DISPATCH (r14) + disp2g */
	/* global_State */
	__u32 g_strempty;	/* GCstr strempty (its gct byte identifies g) */
	__u32 g_vmstate;	/* int32 vmstate */
	__u32 g_mainthref;	/* GCRef mainthref == &GG->L */
	__u32 g_cur_L;		/* GCRef cur_L: the running lua_State */
	__u32 g_jit_base;	/* MRef jit_base: BASE at trace entry, 0 off trace */
	/* lua_State */
	__u32 L_glref;		/* MRef glref -> global_State */
	__u32 L_base;		/* TValue *base */
	__u32 L_top;		/* TValue *top */
	__u32 L_stack;		/* MRef stack */
	__u32 L_maxstack;	/* MRef maxstack: last free slot */
	/* GCobj header */
	__u32 gc_gct;		/* u8 gct: ~itype */
	/* GCfunc */
	__u32 fn_ffid;		/* u8 ffid: 0 Lua, 1 C, >1 builtin */
	__u32 fn_pc;		/* MRef pc (Lua): proto_bc(pt) */
	__u32 fn_f;		/* lua_CFunction f (C) */
	/* GCproto; the bytecode follows the struct */
	__u32 pt_size;		/* sizeof(GCproto): pt = fn->pc - pt_size */
	__u32 pt_sizebc;	/* u32 sizebc */
	__u32 pt_k;		/* MRef k: GC constants at negative indexes */
	__u32 pt_sizeuv;	/* u8 sizeuv */
	__u32 pt_chunkname;	/* GCRef chunkname */
	__u32 pt_firstline;	/* BCLine firstline */
	__u32 pt_numline;	/* BCLine numline */
	__u32 pt_lineinfo;	/* MRef lineinfo */
	__u32 pt_uvinfo;	/* MRef uvinfo */
	__u32 pt_varinfo;	/* MRef varinfo */
	/* GCstr; the characters follow the struct */
	__u32 str_len;		/* MSize len */
	__u32 str_size;		/* sizeof(GCstr) */
	/* jit_State */
	__u32 J_L;		/* lua_State *L being recorded */
	__u32 J_pc;		/* const BCIns *pc: instruction being recorded */
	__u32 J_pt;		/* GCproto *pt: NULL when not in a Lua function */
	__u32 J_state;		/* TraceState state */
	__u32 J_cur_startpt;	/* GCtrace cur: startpt */
	__u32 J_cur_startpc;	/* GCtrace cur: startpc */
	__u32 J_cur_traceno;	/* GCtrace cur: u16 traceno */
	__u32 J_cur_startins;	/* GCtrace cur: BCIns startins (original start op) */
	__u32 J_cur_link;	/* GCtrace cur: u16 link (trace_abort clears it) */
	__u32 J_cur_linktype;	/* GCtrace cur: u8 linktype (trace_abort clears it) */
	__u32 J_flags;		/* uint32_t flags: JIT_F_* */
	__u32 J_parent;		/* TraceNo1 parent */
	__u32 J_exitno;		/* ExitNo exitno */
	__u32 J_penalty;	/* HotPenalty penalty[PENALTY_SLOTS] */
	__u32 J_errinfo;	/* TValue errinfo */
	__u32 J_sizetrace;	/* MSize sizetrace */
};

#endif /* NUPP_LJ_LAYOUT_H */
