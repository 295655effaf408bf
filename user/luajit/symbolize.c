// SPDX-License-Identifier: MIT
/*
 * symbolize.c - Lua stacks and source locations of a LuaJIT process, as text.
 *
 * Ports the naming rules of lj_debug.c (LuaJIT 2.1, GC64) to memory read from
 * another process through struct lj_layout. See symbolize.h for the format.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cfunc_names.h"
#include "symbolize.h"
#include "base/pairmap.h"
#include "base/util.h"

#define FF_LUA		0	/* GCfunc ffid: Lua function */
#define FF_C		1	/* GCfunc ffid: C function; > FF_C: builtin */
#define BUILTIN_LINE	(~(__u32)0)	/* firstline of a bytecode builtin */
#define VARNAME_MAX	7	/* VARNAME__MAX (lj_debug.h): special names below */
#define STR_MAX		65536	/* longest name or chunkname read */
#define STREAM_MAX	(1u << 20)	/* most varinfo/uvinfo bytes scanned */
#define BCINS_MAX	(1u << 26)	/* LJ_MAX_BCINS: no real proto has more */
#define SCAN_MAX	(1u << 16)	/* most instructions a slot name looks back */
#define SCAN_MOVES	64		/* most MOVs it follows to their source */
/* Instructions read at once, looking back from a call site: those the
 * sampler captures before a call (bpf/sampler_abi.h), the call excluded. */
#define BC_BLOCK	(NUPP_SITE_BLOCK - 1)
#define CACHE_MAX	(1u << 20)	/* entries before the caches are flushed */
#define PAGE		4096u

/* The names of VARNAMEDEF, by VARNAME_x - 1 (lj_debug.h). */
static const char *const varname_special[VARNAME_MAX - 1] = {
	"(for index)", "(for limit)", "(for step)",
	"(for generator)", "(for state)", "(for control)",
};

/* lj_strfmt_wptr: "0x" and 8 hex digits, 2 more per used byte above 32 bits. */
int symbolize__fmt_ptr(char out[SYMBOLIZE_PTR_MAX], __u64 x)
{
	static const char hex[] = "0123456789abcdef";
	int n = 2 + 8, i;

	if (x == 0) {
		strcpy(out, "NULL");
		return 4;
	}
	if (x >> 32)
		n += 2 + 2 * ((31 - __builtin_clz((__u32)(x >> 32))) >> 3);
	out[0] = '0';
	out[1] = 'x';
	for (i = n - 1; i >= 2; i--, x >>= 4)
		out[i] = hex[x & 15];
	out[n] = '\0';
	return n;
}

static int put_ptr(struct strbuf *sb, __u64 x)
{
	char p[SYMBOLIZE_PTR_MAX];

	return strbuf__put(sb, p, symbolize__fmt_ptr(p, x));
}

static int put_int(struct strbuf *sb, long v)
{
	char tmp[24], *at = u64_digits(tmp + sizeof(tmp), v < 0 ? -(unsigned long)v : (unsigned long)v);

	if (v < 0)
		*--at = '-';
	return strbuf__put(sb, at, tmp + sizeof(tmp) - at);
}

/* ---------------------------------------------------------------------------
 * The symbolizer
 */

/* What a frame needs of a GCfunc. */
struct lj_fn {
	__u8 ffid;	/* FF_LUA, FF_C or a builtin's number */
	__u64 pt;	/* GCproto * of a Lua function */
	__u64 f;	/* lua_CFunction of a C function or builtin */
};

/* A GCproto header as read; all fields together also validate a cache entry. */
struct lj_proto {
	__u64 addr;		/* GCproto * */
	__u64 bc;		/* proto_bc(): the bytecode */
	__u64 k;		/* GC constants, at negative indexes */
	__u64 chunkname;	/* GCstr * */
	__u64 lineinfo, uvinfo, varinfo;	/* 0 when stripped */
	__u32 sizebc;
	__u32 firstline;	/* BUILTIN_LINE for a bytecode builtin */
	__u32 numline;
	__u8 sizeuv;
};

/* Per proto: its module, and a generation that ties call sites to it. */
struct proto_ent {
	struct lj_proto pt;
	__u64 gen;
	int builtin;	/* firstline == BUILTIN_LINE */
	char *module;	/* escaped; "[builtin:x]" for a builtin */
	char *chunk;	/* as loaded, without '@'/'=' (a path, kept whole);
			 * "[string]" for a string chunk, "" for a builtin */
	__u32 line_pos;	/* the last position whose line was read, */
	int line;	/* and that line; 0: none read yet */
};

/* Per (proto, bytecode position): the name lj_debug_funcname gives there. */
struct site_ent {
	__u64 gen;	/* of the proto_ent it was derived from */
	char *name;	/* escaped, NULL when the call site gives no name */
};

/* Per (chunkname GCstr, builtin): what module_make made of it. The functions
 * of one chunk share its name: read once while the GC epoch stands. */
struct chunk_ent {
	char *module, *chunk;
};

struct symbolizer {
	const struct lj_build *b;
	const struct lj_layout *lj;
	struct mem_reader mem;
	int op_mov, op_gget, op_tgets, op_uget, op_knil, op_iterc;	/* -1 absent */
	struct pairmap protos;	/* (pt, 0) -> struct proto_ent */
	struct pairmap sites;	/* (pt, pos) -> struct site_ent */
	struct pairmap chunks;	/* (chunkname, builtin) -> struct chunk_ent */
	__u64 gen;
	__u64 unknown;
	bool lines;		/* frames carry their current line */
	bool trusted;		/* cached protos hold without a read (symbolizer__trust) */
	struct cfunc_names *cnames;	/* C functions by symbol; NULL: by address */
};

struct symbolizer *symbolizer__new(const struct lj_build *b, struct mem_reader mem)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->b = b;
	s->lj = &b->layout;
	s->mem = mem;
	/* Each is optional: without it, names that need it are not derived. */
	const struct lj_op_name ops[] = {
		{ "MOV", &s->op_mov }, { "GGET", &s->op_gget }, { "TGETS", &s->op_tgets },
		{ "UGET", &s->op_uget }, { "KNIL", &s->op_knil }, { "ITERC", &s->op_iterc },
	};
	lj_ops_by_name(b->bcnames, b->nbcnames, ops, sizeof(ops) / sizeof(ops[0]));
	return s;
}

void symbolizer__set_lines(struct symbolizer *s, bool on)
{
	s->lines = on;
}

void symbolizer__trust(struct symbolizer *s, bool on)
{
	s->trusted = on;
}

void symbolizer__set_cfunc_names(struct symbolizer *s, struct cfunc_names *c)
{
	s->cnames = c;
}

static void proto_ent_free(void *v)
{
	struct proto_ent *pe = v;

	free(pe->module);
	free(pe->chunk);
	free(pe);
}

static void site_ent_free(void *v)
{
	struct site_ent *se = v;

	free(se->name);
	free(se);
}

static void chunk_ent_free(void *v)
{
	struct chunk_ent *ce = v;

	free(ce->module);
	free(ce->chunk);
	free(ce);
}

void symbolizer__flush(struct symbolizer *s)
{
	pairmap__clear(&s->protos, proto_ent_free);
	pairmap__clear(&s->sites, site_ent_free);
	pairmap__clear(&s->chunks, chunk_ent_free);
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	symbolizer__flush(s);
	free(s);
}

/* Bound the caches. Only called on entry: flushing frees entries that the
 * functions below hold pointers to. */
static void cache_bound(struct symbolizer *s)
{
	if (s->protos.n + s->sites.n + s->chunks.n >= CACHE_MAX)
		symbolizer__flush(s);
}

__u64 symbolizer__unknown(const struct symbolizer *s)
{
	return s->unknown;
}

/* ---------------------------------------------------------------------------
 * Reading target memory
 */

static int rd(struct symbolizer *s, void *dst, size_t n, __u64 addr)
{
	if (!addr)
		return -EFAULT;
	return mem_read(&s->mem, dst, n, addr);
}

/* The first max bytes at most of GCstr str; cut at the first NUL when cut
 * is set, as the C string users of strdata() see it. 0 or -errno. The
 * header is read with what follows it up to STR_AHEAD bytes, within its
 * page (mapped, as the header is): a short string costs one read, not two
 * (each read is a process_vm_readv; a program of 20,000 generated chunks
 * reads a chunk name per new function). */
#define STR_AHEAD	256u

static int str_read(struct symbolizer *s, __u64 str, __u32 max, int cut,
		    struct strbuf *out)
{
	const struct lj_layout *lj = s->lj;
	unsigned char buf[STR_AHEAD];
	__u32 len, got = PAGE - (__u32)(str & (PAGE - 1)), have;
	int err;

	if (got > STR_AHEAD)
		got = STR_AHEAD;
	if (got < lj->str_size)
		got = lj->str_size;		/* a header across two pages */
	if (lj->str_size > sizeof(buf))
		return -EFAULT;
	/* A reader of recorded memory may hold the header alone. */
	if (rd(s, buf, got, str) && (got == lj->str_size || rd(s, buf, got = lj->str_size, str)))
		return -EFAULT;
	if (buf[lj->gc_gct] != LJ_GCT_STR)
		return -EINVAL;
	len = load_u32(buf, lj->str_len);
	if (len > max)
		len = max;
	strbuf__reset(out);
	if ((err = strbuf__reserve(out, len)))
		return err;
	have = got - lj->str_size < len ? got - lj->str_size : len;
	memcpy(out->buf, buf + lj->str_size, have);
	if (len > have && rd(s, out->buf + have, len - have, str + lj->str_size + have))
		return -EFAULT;
	out->len = cut ? strnlen(out->buf, len) : len;
	out->buf[out->len] = '\0';
	return 0;
}

/* A forward reader over target bytes of unknown length (varinfo, uvinfo).
 * Reads stop at page ends so the end of a mapping is not read past. */
struct cursor {
	struct symbolizer *s;
	__u64 addr;		/* target address of buf[len] */
	__u32 pos, len;
	__u32 budget;		/* bytes still allowed: garbage must not loop */
	unsigned char buf[256];
};

static void cursor_init(struct cursor *c, struct symbolizer *s, __u64 addr)
{
	c->s = s;
	c->addr = addr;
	c->pos = c->len = 0;
	c->budget = STREAM_MAX;
}

/* Next byte, or -1 when it cannot be read. */
static int cursor_byte(struct cursor *c)
{
	if (c->pos == c->len) {
		__u32 n = PAGE - (__u32)(c->addr & (PAGE - 1));

		if (n > sizeof(c->buf))
			n = sizeof(c->buf);
		if (n > c->budget || rd(c->s, c->buf, n, c->addr))
			return -1;
		c->budget -= n;
		c->addr += n;
		c->pos = 0;
		c->len = n;
	}
	return c->buf[c->pos++];
}

/* lj_buf_ruleb128; 0 or -1. */
static int cursor_uleb(struct cursor *c, __u32 *v)
{
	int b, sh = 0;

	*v = 0;
	do {
		if ((b = cursor_byte(c)) < 0)
			return -1;
		if (sh < 32)
			*v |= (__u32)(b & 0x7f) << sh;
		sh += 7;
	} while (b >= 0x80);
	return 0;
}

/* Append a NUL-terminated string at the cursor to out (NULL: skip it). */
static int cursor_str(struct cursor *c, struct strbuf *out)
{
	int b;

	while ((b = cursor_byte(c)) > 0) {
		char ch = (char)b;

		if (out && strbuf__put(out, &ch, 1))
			return -ENOMEM;
	}
	return b < 0 ? -EFAULT : 0;
}

/* What runs in a frame, from its recorded identity (struct nupp_frame.fn). */
static int fn_decode(__u64 id, struct lj_fn *fn)
{
	__u64 v = NUPP_FN_VALUE(id);

	*fn = (struct lj_fn){ 0 };
	switch (NUPP_FN_KIND(id)) {
	case NUPP_FN_LUA:
		fn->ffid = FF_LUA;
		fn->pt = v;
		return 0;
	case NUPP_FN_C:
		fn->ffid = FF_C;
		fn->f = v;
		return 0;
	case NUPP_FN_FF:
		fn->ffid = (__u8)v;
		return v > FF_C && v < 256 ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

static int proto_read(struct symbolizer *s, __u64 addr, struct lj_proto *pt)
{
	const struct lj_layout *lj = s->lj;
	unsigned char buf[256];

	if (lj->pt_size > sizeof(buf) || rd(s, buf, lj->pt_size, addr))
		return -EFAULT;
	if (buf[lj->gc_gct] != LJ_GCT_PROTO)
		return -EINVAL;
	memset(pt, 0, sizeof(*pt));	/* padding too: entries are memcmp'd */
	pt->addr = addr;
	pt->bc = addr + lj->pt_size;
	pt->k = load_u64(buf, lj->pt_k);
	pt->chunkname = load_u64(buf, lj->pt_chunkname);
	pt->lineinfo = load_u64(buf, lj->pt_lineinfo);
	pt->uvinfo = load_u64(buf, lj->pt_uvinfo);
	pt->varinfo = load_u64(buf, lj->pt_varinfo);
	pt->sizebc = load_u32(buf, lj->pt_sizebc);
	pt->firstline = load_u32(buf, lj->pt_firstline);
	pt->numline = load_u32(buf, lj->pt_numline);
	pt->sizeuv = buf[lj->pt_sizeuv];
	return pt->sizebc > BCINS_MAX ? -EINVAL : 0;	/* a torn or stale read */
}

/* Bytecode instruction at position pos of pt. */
static int bc_read(struct symbolizer *s, const struct lj_proto *pt, __u32 pos, __u32 *ins)
{
	if (pos >= pt->sizebc)
		return -EINVAL;
	return rd(s, ins, 4, pt->bc + 4 * (__u64)pos);
}

/* ---------------------------------------------------------------------------
 * Modules (debug_putchunkname, pathstrip on)
 */

/* The module part of a chunkname: the name without '@'/'=' and path, or
 * "[string]"; "[builtin:name]" for a bytecode builtin. */
static int module_put(struct strbuf *out, const char *name, size_t len, int builtin)
{
	size_t i;

	if (builtin) {
		if (strbuf__puts(out, "[builtin:") || strbuf__put_escaped(out, name, len))
			return -ENOMEM;
		return strbuf__puts(out, "]");
	}
	if (len == 0 || (name[0] != '=' && name[0] != '@'))
		return strbuf__puts(out, "[string]");
	name++, len--;
	for (i = len; i > 0; i--)
		if (name[i - 1] == '/' || name[i - 1] == '\\')
			break;
	return strbuf__put_escaped(out, name + i, len - i);
}

/* The chunk's name as a file: what follows '@' or '=', "[string]" for a
 * chunk loaded from a string (its "name" is its source), "" for a builtin. */
static char *chunk_make(const char *name, size_t len, int builtin)
{
	if (builtin)
		return strdup("");
	if (len == 0 || (name[0] != '=' && name[0] != '@'))
		return strdup("[string]");
	return strndup(name + 1, len - 1);
}

/* pe's module and chunk from the names of ce, copied. */
static int module_copy(struct proto_ent *pe, const struct chunk_ent *ce)
{
	char *mod = strdup(ce->module), *chunk = strdup(ce->chunk);

	if (!mod || !chunk) {
		free(mod);
		free(chunk);
		return -ENOMEM;
	}
	free(pe->module);
	free(pe->chunk);
	pe->module = mod;
	pe->chunk = chunk;
	return 0;
}

/* Remember pe's names for its chunkname (a failure only costs a read). */
static void chunk_remember(struct symbolizer *s, const struct proto_ent *pe)
{
	struct chunk_ent *ce = pairmap__get(&s->chunks, pe->pt.chunkname, pe->builtin);

	if (!pe->module || !pe->chunk)
		return;
	if (!ce && (!(ce = calloc(1, sizeof(*ce))) ||
		    pairmap__put(&s->chunks, pe->pt.chunkname, pe->builtin, ce))) {
		free(ce);
		return;
	}
	free(ce->module);
	free(ce->chunk);
	ce->module = strdup(pe->module);
	ce->chunk = strdup(pe->chunk);
	if (!ce->module || !ce->chunk) {	/* never half of it */
		free(ce->module);
		free(ce->chunk);
		ce->module = ce->chunk = NULL;
	}
}

static int module_make(struct symbolizer *s, struct proto_ent *pe)
{
	struct strbuf raw = { 0 }, mod = { 0 };
	const struct chunk_ent *ce = s->trusted ? pairmap__get(&s->chunks, pe->pt.chunkname, pe->builtin)
						: NULL;
	/* What str_read() reads at once, and a new stack's record holds. */
	__u32 first = STR_AHEAD - s->lj->str_size;
	char *chunk = NULL;
	int err;

	if (ce && ce->module)
		return module_copy(pe, ce);
	err = str_read(s, pe->pt.chunkname, first, 0, &raw);
	/* A chunk loaded from a string is named by its source, which can be
	 * long: read all of the name only when more than its first byte counts. */
	if (!err && raw.len == first && (pe->builtin || raw.buf[0] == '@' || raw.buf[0] == '='))
		err = str_read(s, pe->pt.chunkname, STR_MAX, 0, &raw);
	if (!err)
		err = module_put(&mod, raw.buf, raw.len, pe->builtin);
	if (!err && !(chunk = chunk_make(raw.buf, raw.len, pe->builtin)))
		err = -ENOMEM;
	strbuf__free(&raw);
	if (err) {
		strbuf__free(&mod);
		return err;
	}
	free(pe->module);
	free(pe->chunk);
	pe->module = mod.buf;
	pe->chunk = chunk;
	chunk_remember(s, pe);
	return 0;
}

/* The cache entry for proto addr, re-validated against its header now.
 * NULL with *err set when it cannot be read. */
static struct proto_ent *proto_get(struct symbolizer *s, __u64 addr, int *err)
{
	struct proto_ent *pe = pairmap__get(&s->protos, addr, 0);
	struct lj_proto pt;

	*err = 0;
	if (pe && s->trusted && pe->pt.addr == addr)
		return pe;
	if ((*err = proto_read(s, addr, &pt)))
		return NULL;
	if (pe && !memcmp(&pe->pt, &pt, sizeof(pt)))
		return pe;
	if (!pe) {
		if (!(pe = calloc(1, sizeof(*pe))) || pairmap__put(&s->protos, addr, 0, pe)) {
			free(pe);
			*err = -ENOMEM;
			return NULL;
		}
	}
	pe->pt = pt;
	pe->gen = ++s->gen;
	pe->line = 0;
	pe->builtin = pt.firstline == BUILTIN_LINE;
	if ((*err = module_make(s, pe)))
		pe->pt.addr = 0;	/* never valid: retried next time */
	return *err ? NULL : pe;
}

/* ---------------------------------------------------------------------------
 * Names of call sites (lj_debug_funcname, lj_debug_slotname)
 */

/* Results of the naming functions below. */
enum { NAME_NONE = 0, NAME_FOUND = 1 };

/* The name of local variable slot at position pos (debug_varname).
 * NAME_FOUND with the name in out, NAME_NONE, or -errno. */
static int varname(struct symbolizer *s, const struct lj_proto *pt, __u32 pos,
		   __u32 slot, struct strbuf *out)
{
	struct cursor c;
	__u32 lastpc = 0, start, len;
	int vn;

	if (!pt->varinfo)
		return NAME_NONE;
	cursor_init(&c, s, pt->varinfo);
	for (;;) {
		strbuf__reset(out);
		if ((vn = cursor_byte(&c)) < 0)
			return -EFAULT;
		if (vn == 0)
			return NAME_NONE;	/* VARNAME_END */
		if (vn < VARNAME_MAX) {
			if (strbuf__puts(out, varname_special[vn - 1]))
				return -ENOMEM;
		} else {
			int err = strbuf__put(out, &(char){ (char)vn }, 1);

			if (err || (err = cursor_str(&c, out)))
				return err;
		}
		if (cursor_uleb(&c, &start) || cursor_uleb(&c, &len))
			return -EFAULT;
		lastpc = start += lastpc;
		if (start > pos)
			return NAME_NONE;
		if (pos < start + len && slot-- == 0)
			return NAME_FOUND;
	}
}

/* The name of upvalue idx of pt (lj_debug_uvname): "" when stripped. */
static int uvname(struct symbolizer *s, const struct lj_proto *pt, __u32 idx,
		  struct strbuf *out)
{
	struct cursor c;
	int err;

	strbuf__reset(out);
	if (!pt->uvinfo)
		return strbuf__put(out, "", 0) ? -ENOMEM : NAME_FOUND;
	if (idx >= pt->sizeuv)
		return NAME_NONE;
	cursor_init(&c, s, pt->uvinfo);
	while (idx--)
		if ((err = cursor_str(&c, NULL)))
			return err;
	return (err = cursor_str(&c, out)) ? err : NAME_FOUND;
}

/* The string constant ~d of pt (proto_kgc), cut at its first NUL. */
static int kgc_name(struct symbolizer *s, const struct lj_proto *pt, __u32 d,
		    struct strbuf *out)
{
	__u64 str;

	if (rd(s, &str, 8, pt->k - 8 * ((__u64)d + 1)))
		return -EFAULT;
	return str_read(s, str, STR_MAX, 1, out) ? -EFAULT : NAME_FOUND;
}

/* What the instruction that wrote slot names, for an instruction whose A
 * operand is the destination (the switch of lj_debug_slotname). *slot is
 * set and 2 returned for a MOV: the search restarts from its source. */
static int slot_source(struct symbolizer *s, const struct lj_proto *pt, __u32 ins,
		       __u32 *slot, struct strbuf *out)
{
	int op = ins & 0xff;

	if (op == s->op_mov) {
		*slot = ins >> 16;
		return 2;
	}
	if (op == s->op_gget)
		return kgc_name(s, pt, ins >> 16, out);
	if (op == s->op_tgets)	/* a method call names it the same way */
		return kgc_name(s, pt, (ins >> 16) & 0xff, out);
	if (op == s->op_uget)
		return uvname(s, pt, ins >> 16, out);
	return NAME_NONE;
}

/* The bytecode before a position, read BC_BLOCK instructions at a time. */
struct bc_back {
	__u32 lo, n;		/* ins[] holds positions lo .. lo+n-1 */
	__u32 ins[BC_BLOCK];
};

/* Instruction pos, read with the block that ends at it when not held. */
static int bc_back_get(struct symbolizer *s, const struct lj_proto *pt,
		       struct bc_back *w, __u32 pos, __u32 *ins)
{
	if (pos < w->lo || pos >= w->lo + w->n) {
		__u32 lo = pos >= BC_BLOCK - 1 ? pos - (BC_BLOCK - 1) : 0;

		if (pos >= pt->sizebc || rd(s, w->ins, 4 * (pos - lo + 1), pt->bc + 4 * (__u64)lo))
			return -EFAULT;
		w->lo = lo;
		w->n = pos - lo + 1;
	}
	*ins = w->ins[pos - w->lo];
	return 0;
}

/* Deduce the name of the object in slot at position pos (lj_debug_slotname):
 * a local's name, or what loaded it there (global, field, method, upvalue).
 * It looks back at most SCAN_MAX instructions through SCAN_MOVES moves: a
 * torn read of a huge size must not hold the profiler; no real call site
 * loads its callee that far back. */
static int slotname(struct symbolizer *s, const struct lj_proto *pt, __u32 pos,
		    __u32 slot, struct strbuf *out)
{
	const struct lj_build *b = s->b;
	struct bc_back w = { 0 };
	__u32 ins, stop = pos > SCAN_MAX ? pos - SCAN_MAX : 0;
	int r, moves = 0;

restart:
	if ((r = varname(s, pt, pos, slot, out)) != NAME_NONE)
		return r;
	while (pos > 1 && pos > stop) {	/* back to the header, exclusive */
		int op, mode;
		__u32 ra;

		if (bc_back_get(s, pt, &w, --pos, &ins))
			return -EFAULT;
		op = ins & 0xff;
		ra = (ins >> 8) & 0xff;
		if (op >= b->nbcnames)
			return NAME_NONE;
		mode = b->bcmode[op].a;
		if (mode == b->bcm_base) {
			if (slot >= ra && (op != s->op_knil || slot <= ins >> 16))
				return NAME_NONE;
		} else if (mode == b->bcm_dst && ra == slot) {
			if ((r = slot_source(s, pt, ins, &slot, out)) != 2)
				return r;
			if (++moves > SCAN_MOVES)
				return NAME_NONE;
			goto restart;
		}
	}
	return NAME_NONE;
}

/* The sampler's classes of opcodes (enum nupp_site_op), by opcode: the
 * rules of slotname() and site_derive(), as the data its BPF program scans
 * a call site's bytecode with to capture what naming it reads. */
void symbolizer__site_ops(const struct symbolizer *s, __u8 *ops, size_t n)
{
	const struct lj_build *b = s->b;

	memset(ops, 0, n);
	if (!b->bcmode || !b->mmnames)
		return;
	for (int op = 0; op < b->nbcnames && (size_t)op < n; op++) {
		int a = b->bcmode[op].a;
		__u8 c = NUPP_OP_OTHER;

		if (a == b->bcm_base)
			c = op == s->op_knil ? NUPP_OP_KNIL : NUPP_OP_BASE;
		else if (a == b->bcm_dst)
			c = op == s->op_mov ? NUPP_OP_MOV : op == s->op_gget ? NUPP_OP_GGET :
			    op == s->op_tgets ? NUPP_OP_TGETS : op == s->op_uget ? NUPP_OP_UGET :
			    NUPP_OP_DST;
		if (b->bcmode[op].mm == b->mm_call)
			c |= op == s->op_iterc ? NUPP_OP_ITERC : NUPP_OP_CALL;
		ops[op] = c;
	}
}

/* The name lj_debug_funcname derives from the instruction at pos of the
 * caller pt: the called slot's name for a call, else the metamethod's. */
static int site_derive(struct symbolizer *s, const struct lj_proto *pt, __u32 pos,
		       struct strbuf *out)
{
	const struct lj_build *b = s->b;
	__u32 ins, slot;
	int op, mm;

	if (!b->bcmode || !b->mmnames)
		return NAME_NONE;	/* a build without them: no names of call sites */
	if (bc_read(s, pt, pos, &ins))
		return -EFAULT;
	op = ins & 0xff;
	if (op >= b->nbcnames)
		return NAME_NONE;
	mm = b->bcmode[op].mm;
	if (mm == b->mm_call) {
		slot = (ins >> 8) & 0xff;
		if (op == s->op_iterc)
			slot -= 3;
		return slotname(s, pt, pos, slot, out);
	}
	if (mm == b->mm_max || mm >= b->nmmnames)
		return NAME_NONE;
	strbuf__reset(out);
	return strbuf__puts(out, b->mmnames[mm]) ? -ENOMEM : NAME_FOUND;
}

/* The cached name at (pe, pos); *name NULL when there is none. 1 when the
 * memory that names it could not be read (*name NULL too): a frame named
 * otherwise than LuaJIT names it would be a wrong name, not a missing one. */
static int site_get(struct symbolizer *s, struct proto_ent *pe, __u32 pos,
		    const char **name)
{
	struct site_ent *se = pairmap__get(&s->sites, pe->pt.addr, pos);
	struct strbuf raw = { 0 }, esc = { 0 };
	int r;

	if (se && se->gen == pe->gen)
		goto found;
	r = site_derive(s, &pe->pt, pos, &raw);
	if (r == NAME_FOUND)
		r = strbuf__put_escaped(&esc, raw.buf, raw.len) ? -ENOMEM : NAME_FOUND;
	strbuf__free(&raw);
	if (r < 0) {	/* not cached: the memory may be readable later */
		strbuf__free(&esc);
		*name = NULL;
		return r == -ENOMEM ? r : 1;
	}
	if (!se && (!(se = calloc(1, sizeof(*se))) ||
		    pairmap__put(&s->sites, pe->pt.addr, pos, se))) {
		free(se);
		strbuf__free(&esc);
		return -ENOMEM;
	}
	free(se->name);
	se->gen = pe->gen;
	se->name = esc.buf;	/* NULL when not named */
found:
	*name = se->name;
	return 0;
}

/* Bytecode position of the instruction before pc (debug_framepc), or -1.
 * A pc outside the bytecode (unknown, or a trace's) gives no position. */
static long frame_pos(const struct lj_proto *pt, __u64 pc)
{
	if (pc < pt->bc + 4 || (pc - pt->bc) % 4 || (pc - pt->bc) / 4 - 1 >= pt->sizebc)
		return -1;
	return (long)((pc - pt->bc) / 4 - 1);
}

/* A frame's function as read: its header and, for Lua, its proto's entry. */
struct frame_info {
	int ok;			/* 0: its memory could not be read */
	struct lj_fn fn;
	struct proto_ent *pe;	/* NULL for C functions and builtins */
};

/* Read frame fr's function once, for rendering it and naming its callee. */
static int frame_resolve(struct symbolizer *s, const struct nupp_frame *fr,
			 struct frame_info *fi)
{
	int err = 0;

	*fi = (struct frame_info){ 0 };
	if (fn_decode(fr->fn, &fi->fn))
		return 0;
	if (fi->fn.ffid == FF_LUA && !(fi->pe = proto_get(s, fi->fn.pt, &err)))
		return err == -ENOMEM ? err : 0;
	fi->ok = 1;
	return 0;
}

/* The name a frame got from its caller, the frame above it (lj_debug_funcname):
 * call is how it was called, caller_pc the caller's pc. *name NULL: none;
 * 1: the caller's memory could not be read (site_get). */
static int call_name(struct symbolizer *s, __u64 call, const struct frame_info *caller,
		     __u64 caller_pc, const char **name)
{
	long pos;

	*name = NULL;
	if (call == NUPP_CALL_OTHER || !caller || !caller->pe)
		return 0;
	pos = frame_pos(&caller->pe->pt, caller_pc & ~(__u64)NUPP_CALL_MASK);
	return pos < 0 ? 0 : site_get(s, caller->pe, (__u32)pos, name);
}

/* ---------------------------------------------------------------------------
 * Rendering (lj_debug_dumpstack, 'F')
 */

static int put_unknown(struct symbolizer *s, struct strbuf *out)
{
	s->unknown++;
	return strbuf__puts(out, SYM_UNKNOWN) ? -ENOMEM : 1;
}

/* A frame without a name: the 'l' form with the first line; a C function
 * by its symbol or file address when the symbolizer knows its process,
 * else by its address as dumpstack writes it. */
static int put_unnamed(struct symbolizer *s, struct strbuf *out, const struct frame_info *fi)
{
	const struct proto_ent *pe = fi->pe;
	int err;

	if (pe) {
		if ((err = strbuf__puts(out, pe->module)) || pe->builtin)
			return err;
		return strbuf__puts(out, ":") ||
		       put_int(out, (int)pe->pt.firstline) ? -ENOMEM : 0;
	}
	if (fi->fn.ffid > FF_C) {
		return strbuf__puts(out, "[builtin#") || put_int(out, fi->fn.ffid) ||
		       strbuf__puts(out, "]") ? -ENOMEM : 0;
	}
	if (s->cnames) {
		const char *name = cfunc_names__name(s->cnames, fi->fn.f);

		if (name[0])
			return strbuf__puts(out, name);
	}
	return strbuf__puts(out, "@") || put_ptr(out, fi->fn.f) ? -ENOMEM : 0;
}

static int line_of(struct symbolizer *s, const struct lj_proto *pt, __u32 pos);

/* --lines: ":LINE" after a Lua frame whose pc is known (debug_frameline). */
static int put_line(struct symbolizer *s, const struct nupp_frame *fr,
		    const struct frame_info *self, struct strbuf *out)
{
	long pos;
	int line;

	if (!s->lines || !self->pe || self->pe->builtin || NUPP_PC_IS_TRACE(fr->pc))
		return 0;
	pos = frame_pos(&self->pe->pt, fr->pc & ~(__u64)NUPP_CALL_MASK);
	if (pos < 0 || (line = line_of(s, &self->pe->pt, (__u32)pos)) <= 0)
		return 0;
	return strbuf__puts(out, ":") || put_int(out, line) ? -ENOMEM : 0;
}

/* Frame i, resolved as self; caller is frame i + 1, NULL when absent. */
static int frame_render(struct symbolizer *s, const struct nupp_frame *frames, int i,
			const struct frame_info *self, const struct frame_info *caller,
			struct strbuf *out)
{
	const char *name;
	int err;

	if (!self->ok)
		return put_unknown(s, out);
	err = call_name(s, frames[i].pc & NUPP_CALL_MASK, caller,
			caller ? frames[i + 1].pc : 0, &name);
	if (err)
		return err < 0 ? err : put_unknown(s, out);
	if (!name)
		err = put_unnamed(s, out, self);
	else if (self->pe && !self->pe->builtin &&
		 (strbuf__puts(out, self->pe->module) || strbuf__puts(out, ":")))
		err = -ENOMEM;
	else
		err = strbuf__puts(out, name) ? -ENOMEM : 0;
	return err ? err : put_line(s, &frames[i], self, out);
}

int symbolizer__stack(struct symbolizer *s, const struct nupp_frame *frames,
		      int depth, struct strbuf *out)
{
	return symbolizer__stack_cut(s, frames, depth, depth, out);
}

static int line_of(struct symbolizer *s, const struct lj_proto *pt, __u32 pos);

/* line_of, remembering the last line read of each prototype: a caller's
 * frame sits at the same call site in stack after stack. */
static int proto_line(struct symbolizer *s, struct proto_ent *pe, __u32 pos)
{
	int line;

	if (pe->line > 0 && pe->line_pos == pos)
		return pe->line;
	line = line_of(s, &pe->pt, pos);
	if (line > 0) {
		pe->line_pos = pos;
		pe->line = line;
	}
	return line;
}

/* What frame i is, beyond its text (struct sym_frame). */
static void frame_describe(struct symbolizer *s, const struct nupp_frame *fr,
			   const struct frame_info *fi, struct sym_frame *out)
{
	const struct proto_ent *pe = fi->pe;
	long pos;
	int line;

	if (!fi->ok) {
		out->kind = SYM_KIND_UNREAD;
	} else if (pe && !pe->builtin) {
		out->kind = SYM_KIND_LUA;
		out->chunk = pe->chunk;
		out->start_line = pe->pt.firstline;
		pos = frame_pos(&pe->pt, fr->pc & ~(__u64)NUPP_CALL_MASK);
		line = pos < 0 ? 0 : proto_line(s, fi->pe, (__u32)pos);
		out->line = line > 0 ? (__u32)line : 0;
	} else if (!pe && fi->fn.ffid == FF_C) {
		out->kind = SYM_KIND_C;
		out->addr = fi->fn.f;
	} else {
		out->kind = SYM_KIND_BUILTIN;
	}
}

/* symbolizer__stack_info, info optional. */
static int stack_render(struct symbolizer *s, const struct nupp_frame *frames, int depth,
			int shown, struct strbuf *out, struct sym_frame *info)
{
	struct frame_info fi[2];	/* frame i and its caller, i + 1 */
	int i, r, unknown = 0;

	cache_bound(s);
	if (strbuf__put(out, "", 0))
		return -ENOMEM;
	/* Outermost first, so each frame is read once: as itself, then as the
	 * caller of the next. */
	for (i = depth - 1; i >= 0; i--) {
		struct frame_info *self = &fi[i & 1], *caller = &fi[(i + 1) & 1];
		size_t at;

		if ((r = frame_resolve(s, &frames[i], self)))
			return r;
		if (i >= shown)
			continue;
		if (i != shown - 1 && strbuf__puts(out, ";"))
			return -ENOMEM;
		at = out->len;
		r = frame_render(s, frames, i, self, i + 1 < depth ? caller : NULL, out);
		if (r < 0)
			return r;
		unknown += r;
		if (info) {
			info[shown - 1 - i] = (struct sym_frame){ .off = at, .len = out->len - at };
			frame_describe(s, &frames[i], self, &info[shown - 1 - i]);
		}
	}
	return unknown;
}

int symbolizer__stack_cut(struct symbolizer *s, const struct nupp_frame *frames,
			  int depth, int shown, struct strbuf *out)
{
	return stack_render(s, frames, depth, shown, out, NULL);
}

int symbolizer__stack_info(struct symbolizer *s, const struct nupp_frame *frames,
			   int depth, int shown, struct strbuf *out, struct sym_frame *info)
{
	return stack_render(s, frames, depth, shown, out, info);
}

/* ---------------------------------------------------------------------------
 * Lines (lj_debug_line, debug_frameline)
 */

static int line_of(struct symbolizer *s, const struct lj_proto *pt, __u32 pos)
{
	int w = pt->numline < 256 ? 1 : pt->numline < 65536 ? 2 : 4;
	__u32 v = 0;

	if (pos > pt->sizebc || !pt->lineinfo)
		return 0;
	if (pos == pt->sizebc)
		return (int)(pt->firstline + pt->numline);
	if (pos == 0)
		return (int)pt->firstline;
	/* lineinfo holds one entry per instruction after the header. */
	if (rd(s, &v, w, pt->lineinfo + (__u64)w * (pos - 1)))
		return -1;
	return (int)(pt->firstline + v);
}

int symbolizer__line(struct symbolizer *s, __u64 pt, __u32 pos)
{
	struct lj_proto p;

	return proto_read(s, pt, &p) ? -1 : line_of(s, &p, pos);
}

int symbolizer__frame_line(struct symbolizer *s, const struct nupp_frame *fr)
{
	struct lj_proto p;
	struct lj_fn fn;
	long pos;

	if (fn_decode(fr->fn, &fn) || fn.ffid != FF_LUA || proto_read(s, fn.pt, &p))
		return -1;
	pos = frame_pos(&p, fr->pc & ~(__u64)NUPP_CALL_MASK);
	return pos < 0 ? -1 : line_of(s, &p, (__u32)pos);
}

int symbolizer__loc(struct symbolizer *s, __u64 pt, __u32 pos, struct strbuf *out)
{
	struct proto_ent *pe;
	int err, line;

	cache_bound(s);
	if (!(pe = proto_get(s, pt, &err)))
		return err == -ENOMEM ? err : put_unknown(s, out);
	if (pe->builtin)
		return strbuf__puts(out, pe->module) ? -ENOMEM : 0;
	if ((line = line_of(s, &pe->pt, pos)) < 0)
		return put_unknown(s, out);
	return strbuf__puts(out, pe->module) || strbuf__puts(out, ":") ||
	       put_int(out, line) ? -ENOMEM : 0;
}
