/* SPDX-License-Identifier: MIT */
/*
 * lj_layout.h - the memory layout of one LuaJIT build, as data.
 *
 * Shared by the BPF programs and userspace. Nothing here is a LuaJIT constant:
 * every value is filled in by userspace from the build registry (generated from
 * real rebuilds, see scripts/gen-registry.py) and verified against the target
 * at attach time (user/luajit/lj_target.c). Only x86-64 GC64 builds are supported
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

/* The VM's C frame (x64 POSIX, GC64; lj_frame.h): L->cframe & ~3 points at
 * it, and it keeps the interpreter's PC there around calls out of the VM. */
#define LJ_CFRAME_RAWMASK	(~3ULL)
#define LJ_CFRAME_RESUME	1	/* L->cframe of a coroutine that may yield */
#define LJ_CFRAME_OFS_PC	24

/* g->vmstate holds ~LJ_VMST_x, or a trace number (>= 0) while on trace. */
#define LJ_VMST_INTERP	(-1)
#define LJ_VMST_C	(-2)
#define LJ_VMST_GC	(-3)
#define LJ_VMST_EXIT	(-4)
#define LJ_VMST_RECORD	(-5)
#define LJ_VMST_OPT	(-6)
#define LJ_VMST_ASM	(-7)

/* GC object types as an object's gct byte holds them (~LJ_T*, lj_obj.h),
 * the same in every LuaJIT 2.1. */
#define LJ_GCT_STR	4
#define LJ_GCT_UPVAL	5
#define LJ_GCT_THREAD	6
#define LJ_GCT_PROTO	7
#define LJ_GCT_FUNC	8
#define LJ_GCT_TRACE	9
#define LJ_GCT_CDATA	10
#define LJ_GCT_TAB	11
#define LJ_GCT_UDATA	12

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
	__u32 L_cframe;		/* void *cframe: the innermost C frame (| flag bits) */
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
	__u32 J_trace;		/* GCRef *trace: the traces by number */
	/* GCtrace (a compiled trace); all 0 in a build whose layout lacks
	 * them, which turns the mapping of compiled samples off */
	__u32 tr_size;		/* sizeof(GCtrace) */
	__u32 tr_nsnap;		/* u16 nsnap */
	__u32 tr_nins;		/* IRRef nins: IR refs below it are valid */
	__u32 tr_ir;		/* IRIns *ir, biased: ir + ref */
	__u32 tr_nk;		/* IRRef nk: the lowest IR constant */
	__u32 tr_nsnapmap;	/* u32 nsnapmap */
	__u32 tr_snap;		/* SnapShot *snap */
	__u32 tr_snapmap;	/* SnapEntry *snapmap */
	__u32 tr_startpt;	/* GCRef startpt */
	__u32 tr_startpc;	/* MRef startpc */
	__u32 tr_szmcode;	/* MSize szmcode */
	__u32 tr_mcode;		/* MCode *mcode */
	__u32 tr_traceno;	/* u16 traceno */
	/* SnapShot */
	__u32 sn_size;		/* sizeof(SnapShot) */
	__u32 sn_mapofs;	/* u32 mapofs: its entries in snapmap */
	__u32 sn_mcofs;		/* u16 mcofs: where its code starts in mcode */
	__u32 sn_nslots;	/* u8 nslots */
	__u32 sn_nent;		/* u8 nent: entries, the PC after them */
	/* IRIns */
	__u32 ir_size;		/* sizeof(IRIns) */
	__u32 ir_o;		/* u8 o: the IR opcode */
	/* The heap, for its census (nupp-bpf heap); all 0 in a revision that
	 * lacks one of them (before the string table's redesign of 2020-06,
	 * upstream 4e2d3a6b: no g->str), which turns the census off */
	__u32 g_gc_total;	/* GCSize gc.total: collectgarbage("count") * 1024 */
	__u32 g_gc_root;	/* GCRef gc.root: every object but strings */
	__u32 g_gc_mmudata;	/* GCRef gc.mmudata: the last userdata with a finalizer */
	__u32 g_str_tab;	/* GCRef *str.tab: the string table's chains */
	__u32 g_str_mask;	/* MSize str.mask: its size - 1 */
	__u32 g_registrytv;	/* TValue registrytv */
	__u32 gg_size;		/* sizeof(GG_State), counted in gc.total */
	__u32 gc_nextgc;	/* GCRef nextgc: the next object of a list */
	__u32 gc_marked;	/* u8 marked: the GC's colour bits */
	__u32 L_size;		/* sizeof(lua_State) */
	__u32 L_stacksize;	/* MSize stacksize: TValue slots */
	__u32 fnl_size;		/* sizeof(GCfuncL) */
	__u32 fnc_size;		/* sizeof(GCfuncC) */
	__u32 fn_nupvalues;	/* u8 nupvalues */
	__u32 pt_sizept;	/* MSize sizept: the whole prototype's bytes */
	__u32 tab_size;		/* sizeof(GCtab) */
	__u32 tab_array;	/* MRef array */
	__u32 tab_metatable;	/* GCRef metatable */
	__u32 tab_node;		/* MRef node */
	__u32 tab_asize;	/* u32 asize: array slots */
	__u32 tab_hmask;	/* u32 hmask: hash slots - 1 */
	__u32 tab_colo;		/* int8 colo: array slots allocated with the table */
	__u32 node_size;	/* sizeof(Node) */
	__u32 ud_size;		/* sizeof(GCudata) */
	__u32 ud_len;		/* MSize len */
	__u32 uv_size;		/* sizeof(GCupval) */
	__u32 cd_size;		/* sizeof(GCcdata) */
	__u32 cd_ctypeid;	/* u16 ctypeid */
	/* What refers to what, for the census's reference paths */
	__u32 node_val;		/* TValue val of a Node */
	__u32 node_key;		/* TValue key */
	__u32 fn_env;		/* GCRef env of a function */
	__u32 fnl_uvptr;	/* GCRef uvptr[]: a Lua function's upvalues */
	__u32 uv_v;		/* MRef v: where an upvalue's value is */
	__u32 L_env;		/* GCRef env of a thread */
	__u32 ud_metatable;	/* GCRef metatable of a userdata */
	__u32 ud_env;		/* GCRef env */
};

/* The field at byte off of buf, a block of target memory read at once, of a
 * power-of-two size plus 8 bytes of slack. Masking rather than testing keeps
 * the verifier's paths few (fields are aligned to their size; userspace
 * checks that the offsets fit the block). */
#define lj_u64_at(buf, off, size)	(*(const __u64 *)((buf) + ((off) & ((size) - 8))))
#define lj_u32_at(buf, off, size)	(*(const __u32 *)((buf) + ((off) & ((size) - 4))))
#define lj_u16_at(buf, off, size)	(*(const __u16 *)((buf) + ((off) & ((size) - 2))))
#define lj_u8_at(buf, off, size)	((buf)[(off) & ((size) - 1)])

#endif /* NUPP_LJ_LAYOUT_H */
