// SPDX-License-Identifier: MIT
/*
 * code_layout.c - what a LuaJIT file's code says of its build (code_sites.h):
 * GC64 or not, the struct offsets a function uses, and whether a layout
 * fits the interpreter's own stores.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <capstone/capstone.h>
#include <gelf.h>
#include <elfutils/libdw.h>
#include "code_sites.h"
#include "x86_code.h"
#include "elf_file.h"
#include "base/util.h"

/* ---- GC64 -------------------------------------------------------------------- *
 * A GC64 TValue is one 64-bit word: its type is the top 17 bits (itype(o) =
 * (int64_t)o->it64 >> 47) and a GC object's pointer the low 47 (gcval():
 * & LJ_GCVMASK). Without GC64 a TValue is a 32-bit payload and a 32-bit tag
 * at offset 4. The exported accessors below read a TValue each. A function
 * shows GC64 with a sar/shr of a 64-bit register by 47 or the immediate
 * 0x7fffffffffff; 32-bit tags without either and with a 4-byte access
 * (not lea, not nop) at [reg + 4], reg a GPR but rsp. A non-GC64 build's
 * light userdata mask (39 bits) and shift (by 39) are neither. The answer
 * needs two functions that agree and none that disagrees: lua_topointer,
 * a tail call to lj_obj_ptr in upstream's v2.1 and in gcc -O1/-Os builds,
 * often shows nothing.
 */

enum { TV_NONE, TV_GC64, TV_TAG32 };

static const char *const tvalue_readers[] = {
	"lua_type", "lua_touserdata", "lua_tothread", "lua_topointer",
};
#define NREADERS	(sizeof(tvalue_readers) / sizeof(tvalue_readers[0]))

/* What the function decoded in fn shows of the TValues it reads. */
static int tvalue_kind(const struct insns *fn)
{
	bool gc64 = false, tag32 = false;

	for (size_t i = 0; i < fn->n && !gc64; i++) {
		const struct ins *in = &fn->v[i];

		if ((in->id == X86_INS_SAR || in->id == X86_INS_SHR) && in->op[0].type == X86_OP_REG &&
		    in->op[0].size == 8 && in->op[1].type == X86_OP_IMM && in->op[1].v == 47)
			gc64 = true;
		for (int k = 0; k < 2; k++) {
			const struct opnd *o = &in->op[k];

			if (o->type == X86_OP_IMM && (__u64)o->v == LJ_GCVMASK)
				gc64 = true;
			else if (o->type == X86_OP_MEM && o->size == 4 && o->v == 4 && o->base >= 0 &&
				 o->base != CODE_SITE_RSP && in->id != X86_INS_LEA && in->id != X86_INS_NOP)
				tag32 = true;
		}
	}
	return gc64 ? TV_GC64 : tag32 ? TV_TAG32 : TV_NONE;
}

/* "a, b and c" from n names. */
static void join_names(char *buf, size_t sz, const char *const *v, int n)
{
	size_t len = 0;

	buf[0] = 0;
	for (int i = 0; i < n && len < sz; i++)
		len += snprintf(buf + len, sz - len, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", v[i]);
}

static int build_gc64(struct cfile *f, char *why, size_t whysz)
{
	const char *shows[3][NREADERS];
	char a[128], b[128];
	int n[3] = { 0 };

	for (size_t i = 0; i < NREADERS; i++) {
		__u64 fn = elf_file__func(f->ef, tvalue_readers[i]), hi;
		int k;

		if (!fn || cfile__decode_fde(f, fn, &hi))
			continue;
		k = tvalue_kind(&f->fn);
		shows[k][n[k]++] = tvalue_readers[i];
	}
	join_names(a, sizeof(a), shows[TV_GC64], n[TV_GC64]);
	join_names(b, sizeof(b), shows[TV_TAG32], n[TV_TAG32]);
	if (n[TV_GC64] >= 2 && !n[TV_TAG32]) {
		snprintf(why, whysz, "GC64: %s take types by a 47-bit shift or mask 47-bit pointers", a);
		return 1;
	}
	if (n[TV_TAG32] >= 2 && !n[TV_GC64]) {
		snprintf(why, whysz, "not GC64: %s read 32-bit type tags at offset 4", b);
		return 0;
	}
	if (n[TV_GC64] && n[TV_TAG32])
		snprintf(why, whysz, "cannot tell: %s read GC64 TValues, %s 32-bit tags", a, b);
	else
		snprintf(why, whysz, "cannot tell: %d of lua_type, lua_touserdata, lua_tothread and "
			 "lua_topointer show how they read TValues, 2 needed", n[TV_GC64] + n[TV_TAG32]);
	return -1;
}

int code_sites__gc64(const char *path, char *why, size_t whysz)
{
	struct cfile f;
	int ret = -1;

	if (!cfile__open(&f, path, NULL, why, whysz))
		ret = build_gc64(&f, why, whysz);
	cfile__close(&f);
	return ret;
}

/* ---- struct offsets in a function ------------------------------------------- */

static int cmp_s64(const void *a, const void *b)
{
	__s64 x = *(const __s64 *)a, y = *(const __s64 *)b;

	return x < y ? -1 : x > y;
}

/* The distinct displacements of the [reg + disp] operands of the function
 * whose FDE starts at addr, ascending, in *out (to free): how many, or -1.
 * reg is a GPR but rsp (a stack slot says nothing of a struct); a segment
 * override or no base register (an absolute address) does not count. Read
 * from all of capstone's operands: struct ins keeps two, VEX forms have
 * three. */
static long fn_disps(struct cfile *f, __u64 addr, __s64 **out)
{
	__u64 hi;
	const __u8 *p;
	uint64_t at = addr;
	size_t left;
	__s64 *v;
	long n = 0, u = 0;

	*out = NULL;
	/* decode_fde: every jump of the function lands on an instruction. */
	if (cfile__decode_fde(f, addr, &hi) || !(p = cfile__code_bytes(f, addr, hi)))
		return -1;
	v = malloc((8 * f->fn.n + 1) * sizeof(*v));
	if (!v)
		return -1;
	left = hi - addr;
	while (left && cfile__disasm(f, &p, &left, &at)) {
		const cs_x86 *x = &f->ci->detail->x86;

		for (int k = 0; k < x->op_count && k < 8; k++) {
			const cs_x86_op *o = &x->operands[k];
			int base = o->type == X86_OP_MEM ? x86__gpr(o->mem.base) : NO_REG;

			if (base >= 0 && base != CODE_SITE_RSP && o->mem.segment == X86_REG_INVALID)
				v[n++] = o->mem.disp;
		}
	}
	qsort(v, n, sizeof(*v), cmp_s64);
	for (long i = 0; i < n; i++)
		if (!u || v[i] != v[u - 1])
			v[u++] = v[i];
	*out = v;
	return u;
}

int code_sites__offsets_used(const char *path, const char *func, __s64 *disps, int max)
{
	struct cfile f;
	char err[160];
	__s64 *v = NULL;
	__u64 a;
	long n = -1;

	if (!cfile__open(&f, path, NULL, err, sizeof(err)) && (a = elf_file__func(f.ef, func)))
		n = fn_disps(&f, a, &v);
	for (long i = 0; i < n && i < max; i++)
		disps[i] = v[i];
	free(v);
	cfile__close(&f);
	return n;
}

/* ---- the layout ---------------------------------------------------------------- *
 * A layout (bpf/lj_layout.h) fits unless the code shows otherwise:
 *   - the build is GC64 (above); a non-GC64 build fits no layout;
 *   - GG_DISP2G: the interpreter (buildvm's code, the same whatever compiler
 *     built the rest) keeps DISPATCH in r14 and stores the vmstate with
 *     mov dword [DISPATCH + disp2g + g_vmstate], ~LJ_VMST_x (set_vmstate).
 *     All its stores of an immediate LJ_VMST_INTERP..LJ_VMST_ASM through r14
 *     must have one displacement, with INTERP and C among them; it must be
 *     the layout's disp2g + g_vmstate. This ties sizeof(global_State),
 *     sizeof(jit_State) and the hot counters together, JIT or not;
 *   - J from g: luaJIT_setmode begins with lj_trace_abort(g)
 *     (G2J(g)->state &= ~LJ_TRACE_ACTIVE) and, for LUAJIT_MODE_ENGINE,
 *     changes G2J(g)->flags, both through the register holding g: with
 *     g2j = gg_j - gg_g, its displacements hold g2j + J_state and g2j +
 *     J_flags. Both were there in every build checked (gcc -O1, -O2, -O3,
 *     -Os, -fno-omit-frame-pointer, clang -O2, -Os, -O3; luajit, luajit2,
 *     upstream), where other displacements of J (g2j itself for G2J(g),
 *     J->trace) come and go with inlining. A compiler could also take
 *     J = g + g2j first and J_state, J_flags from it: g2j, J_state and
 *     J_flags all there count too (no build checked does that). What else
 *     the function addresses (g's hookmask, wrapf and bc_cfunc_ext,
 *     lua_State, GCfunc, GCproto, frame slots) lies below sizeof(global_State)
 *     = g2j: a displacement past g2j reaches into J. So when one does and
 *     neither form is there, the layout is wrong; when none does (no JIT
 *     compiler: no lj_trace_abort, no engine mode), nothing is checked, nor
 *     is it for a layout without J (gg_j 0).
 * g's own fields are the same in every tree checked (lua_gc's g->gc,
 * lua_sethook's g->hookmask): they tell no layout from another.
 */

/* The displacement d of the interpreter's vmstate stores (the blob decoded
 * leniently): 0, or -1 with the reason. */
static int vmstate_disp(struct cfile *f, __s64 *d, char *why, size_t whysz)
{
	bool interp = false, c = false;
	int n = 0;

	if (cfile__decode_fn(f, f->vm_lo, f->vm_hi, true)) {
		snprintf(why, whysz, "the interpreter does not decode");
		return -1;
	}
	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *in = &f->fn.v[i];
		const struct opnd *m = &in->op[0], *s = &in->op[1];
		__s32 st;

		if (in->id != X86_INS_MOV || m->type != X86_OP_MEM || m->size != 4 || m->base != CODE_SITE_R14 ||
		    m->index != NO_REG || s->type != X86_OP_IMM)
			continue;
		st = (__s32)s->v;
		if (st > LJ_VMST_INTERP || st < LJ_VMST_ASM)
			continue;
		if (n++ && m->v != *d) {
			snprintf(why, whysz, "the interpreter stores LJ_VMST_* values at [r14%+lld] and [r14%+lld]",
				 (long long)*d, (long long)m->v);
			return -1;
		}
		*d = m->v;
		interp |= st == LJ_VMST_INTERP;
		c |= st == LJ_VMST_C;
	}
	if (!interp || !c) {
		snprintf(why, whysz, "the interpreter stores no LJ_VMST_INTERP and LJ_VMST_C through r14");
		return -1;
	}
	return 0;
}

/* luaJIT_setmode against the layout's J: 1 fits, 0 wrong, -1 nothing to
 * check; why says what was seen. */
static int j_from_g(struct cfile *f, const struct lj_layout *lj, char *why, size_t whysz)
{
	__s64 g2j = (__s64)lj->gg_j - lj->gg_g, st = g2j + lj->J_state, fl = g2j + lj->J_flags, *v;
	__u64 a = elf_file__func(f->ef, "luaJIT_setmode");
	bool has_st = false, has_fl = false, has_j = false, has_jst = false, has_jfl = false;
	char past[96] = "";
	size_t len = 0;
	int npast = 0;
	long n;

	if (!lj->gg_j || g2j <= 0) {
		snprintf(why, whysz, "no jit_State in the layout");
		return -1;
	}
	if (!a || (n = fn_disps(f, a, &v)) < 0) {
		snprintf(why, whysz, a ? "luaJIT_setmode does not decode" : "no luaJIT_setmode export");
		return -1;
	}
	for (long i = 0; i < n; i++) {
		has_st |= v[i] == st;
		has_fl |= v[i] == fl;
		has_j |= v[i] == g2j;
		has_jst |= v[i] == lj->J_state;
		has_jfl |= v[i] == lj->J_flags;
		if (v[i] > g2j && npast++ < 4 && len < sizeof(past))
			len += snprintf(past + len, sizeof(past) - len, "%s%lld", npast > 1 ? "," : "",
					(long long)v[i]);
	}
	free(v);
	if (has_st && has_fl) {
		snprintf(why, whysz, "luaJIT_setmode reaches J->state at g+%lld and J->flags at g+%lld",
			 (long long)st, (long long)fl);
		return 1;
	}
	if (has_j && has_jst && has_jfl) {
		snprintf(why, whysz, "luaJIT_setmode takes J at g+%lld, J->state at +%u, J->flags at +%u",
			 (long long)g2j, lj->J_state, lj->J_flags);
		return 1;
	}
	if (!npast) {
		snprintf(why, whysz, "luaJIT_setmode reaches nothing past g+%lld (no JIT compiler?)",
			 (long long)g2j);
		return -1;
	}
	snprintf(why, whysz, "luaJIT_setmode reaches g+%s%s, not J->state at g+%lld and J->flags at g+%lld",
		 past, npast > 4 ? ",..." : "", (long long)st, (long long)fl);
	return 0;
}

static bool check_layout(struct cfile *f, const struct lj_layout *lj, char *why, size_t whysz)
{
	char gw[160], vw[192] = "", jw[160], verr[128];
	__s64 d = 0, want = (__s64)lj->disp2g + lj->g_vmstate;
	int gc64 = build_gc64(f, gw, sizeof(gw)), vm = -1, j;

	if (!gc64) {
		snprintf(why, whysz, "%s; layouts are GC64", gw);
		return false;
	}
	if (!lj->disp2g || !lj->g_vmstate)
		snprintf(vw, sizeof(vw), "the layout gives no disp2g/g_vmstate");
	else if (cfile__find_vm(f, verr, sizeof(verr)))
		snprintf(vw, sizeof(vw), "no interpreter: %s", verr);
	else if (!(vm = vmstate_disp(f, &d, vw, sizeof(vw))) && d != want) {
		snprintf(why, whysz, "the interpreter stores the vmstate at DISPATCH%+lld, the layout "
			 "puts it at DISPATCH%+lld (disp2g %d + g_vmstate %u)", (long long)d,
			 (long long)want, lj->disp2g, lj->g_vmstate);
		return false;
	}
	j = j_from_g(f, lj, jw, sizeof(jw));
	if (!j) {
		snprintf(why, whysz, "%s", jw);
		return false;
	}
	if (!vm)
		snprintf(vw, sizeof(vw), "vmstate at DISPATCH%+lld", (long long)d);
	snprintf(why, whysz, "fits: %s; %s; %s", gc64 > 0 ? "GC64" : "GC64 unknown", vw, jw);
	return true;
}

bool code_sites__layout_check(const char *path, const struct lj_layout *lj, char *why, size_t whysz)
{
	struct cfile f;
	char err[160];
	bool ret = true;

	if (cfile__open(&f, path, lj, err, sizeof(err)))
		snprintf(why, whysz, "not checked: %s", err);
	else
		ret = check_layout(&f, lj, why, whysz);
	cfile__close(&f);
	return ret;
}

bool code_sites__layout_fits(const char *path, const struct lj_layout *lj)
{
	return code_sites__layout_check(path, lj, NULL, 0);
}

const char *code_sites__reg_name(int reg)
{
	static const char *const names[] = {
		"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
	};

	return reg >= 0 && reg < 16 ? names[reg] : "?";
}
