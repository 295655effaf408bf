// SPDX-License-Identifier: MIT
/* objects.c - what an object of a LuaJIT heap weighs (objects.h). */
#include "objects.h"
#include "base/util.h"

const char *const heap_type_names[HEAP_TYPES] = {
	"table", "string", "Lua function", "C function", "upvalue", "prototype", "thread",
	"userdata", "cdata", "trace",
};

#define ASIZE_MAX	(1U << 28)	/* LJ_MAX_ASIZE: array slots */
#define HSIZE_MAX	(1U << 27)	/* LJ_MAX_HBITS 26: hash slots */
#define STRLEN_MAX	0x7fffff00U	/* LJ_MAX_STR */

__u32 heap_object__header_len(const struct lj_layout *lj)
{
	__u32 n = lj->tab_size;

	n = lj->fnc_size > n ? lj->fnc_size : n;
	n = lj->pt_size > n ? lj->pt_size : n;
	n = lj->L_size > n ? lj->L_size : n;
	n = lj->ud_size > n ? lj->ud_size : n;
	n = lj->tr_size > n ? lj->tr_size : n;
	return n;
}

/* A table's bytes as lj_tab_free gives them back: the GCtab with the array
 * slots allocated with it (colo), the hash part when it has one (hmask 0
 * is the shared empty node), the array part when apart. */
static int table_bytes(const struct lj_layout *lj, const unsigned char *h, __u64 *bytes)
{
	__u32 asize = load_u32(h, lj->tab_asize), hmask = load_u32(h, lj->tab_hmask);
	__s8 colo = (__s8)h[lj->tab_colo];

	if (asize > ASIZE_MAX || hmask >= HSIZE_MAX || (hmask & (hmask + 1)))
		return 1;
	*bytes = colo ? lj->tab_size + (__u64)(colo & 0x7f) * 8 : lj->tab_size;
	if (hmask)
		*bytes += (__u64)(hmask + 1) * lj->node_size;
	if (asize && colo <= 0)
		*bytes += (__u64)asize * 8;
	return 0;
}

int heap_object__weigh(const struct lj_layout *lj, __u64 GG, __u64 o, const unsigned char *h,
		       enum heap_type *type, __u64 *bytes)
{
	__u32 len;
	__u8 n;

	switch (h[lj->gc_gct]) {
	case LJ_GCT_TAB:
		*type = HEAP_TABLE;
		return table_bytes(lj, h, bytes);
	case LJ_GCT_STR:
		*type = HEAP_STRING;
		len = load_u32(h, lj->str_len);
		if (len > STRLEN_MAX)
			return 1;
		*bytes = lj->str_size + (__u64)len + 1;
		return 0;
	case LJ_GCT_FUNC:
		n = h[lj->fn_nupvalues];
		if (h[lj->fn_ffid] == 0) {
			*type = HEAP_LUA_FUNCTION;
			*bytes = lj->fnl_size - 8 + 8ULL * n;
		} else {
			*type = HEAP_C_FUNCTION;
			*bytes = lj->fnc_size - 8 + 8ULL * n;	/* TValue upvalue[] */
		}
		return 0;
	case LJ_GCT_UPVAL:
		*type = HEAP_UPVALUE;
		*bytes = lj->uv_size;
		return 0;
	case LJ_GCT_PROTO:
		*type = HEAP_PROTO;
		*bytes = load_u32(h, lj->pt_sizept);
		return *bytes < lj->pt_size;
	case LJ_GCT_THREAD:
		*type = HEAP_THREAD;
		/* The main thread's lua_State is part of GG_State (the VM's bytes). */
		*bytes = 8ULL * load_u32(h, lj->L_stacksize) + (o == GG ? 0 : lj->L_size);
		return 0;
	case LJ_GCT_UDATA:
		*type = HEAP_USERDATA;
		*bytes = lj->ud_size + (__u64)load_u32(h, lj->ud_len);
		return 0;
	case LJ_GCT_CDATA:
		*type = HEAP_CDATA;
		*bytes = lj->cd_size;	/* its payload's size is its ctype's: not read */
		return 0;
	case LJ_GCT_TRACE:
		*type = HEAP_TRACE;
		if (!lj->tr_size)
			return 1;
		/* trace_save() in lj_trace.c */
		*bytes = ((lj->tr_size + 7) & ~7ULL) +
			 (__u64)(load_u32(h, lj->tr_nins) - load_u32(h, lj->tr_nk)) * lj->ir_size +
			 (__u64)(*(const __u16 *)(h + lj->tr_nsnap)) * lj->sn_size +
			 4ULL * load_u32(h, lj->tr_nsnapmap);
		return 0;
	default:
		return 1;
	}
}
