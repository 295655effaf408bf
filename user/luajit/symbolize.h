/* SPDX-License-Identifier: MIT */
/*
 * symbolize.h - Lua stacks and source locations of a LuaJIT process, as text.
 *
 * A stack recorded by the sampler (struct nupp_frame, innermost first) is
 * rendered outermost first, frames joined by ';', each frame exactly as
 *	jit.profile.dumpstack(L, "F;", -N)
 * renders it (lj_debug_dumpstack, format 'F', paths stripped):
 *	module:name	Lua function named by its caller's call site
 *	name		C function or builtin named by its caller
 *	module:line	Lua function without a name (line = where it starts)
 *	[builtin:x]	bytecode builtin (firstline == ~0) without a name
 *	[builtin#N]	fast function N without a name
 *	@0x55d0c0	C function without a name (lj_strfmt_putptr format)
 * "module" is the chunkname with the path removed ("@src/app.lua" -> "app.lua",
 * "=stdin" -> "stdin"), or "[string]" for a chunk loaded from a string.
 *
 * Names come from the caller frame's bytecode, as lj_debug_funcname derives
 * them; the sampler only records frames called from Lua or by a metamethod
 * continuation as nameable (enum nupp_call). LuaJIT also names a Lua frame
 * called from C *directly above another Lua frame* (an error handler for a
 * runtime error, a hook, a finalizer) by searching the C frame chain, which a
 * sampled stack does not have: such frames render as module:line here.
 *
 * Frames whose memory cannot be read render as SYM_UNKNOWN and are counted
 * (symbolizer__unknown); nothing is guessed.
 *
 * Escaping: bytes that would break the collapsed-stack format (one stack per
 * line, ';' between frames, a space before the count) are written as \xHH
 * with two lower-case hex digits: ';', '\\', every control character
 * (0x00-0x1f, including '\n' and '\r'), 0x7f, and every byte >= 0x80 that is
 * not part of well-formed UTF-8 (a chunk name can hold any byte; every output
 * is UTF-8). '\\' is escaped so that the escape itself is unambiguous. Spaces
 * and UTF-8 sequences stay as they are.
 *
 * Caches: the module of a proto and the name at a call site are kept per
 * proto address and re-validated against the proto's header on every use, so
 * a proto freed and another allocated at the same address is noticed unless
 * it has the same chunkname string, first line, line count and size.
 */
#ifndef NUPP_SYMBOLIZE_H
#define NUPP_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include "lj_build.h"
#include "base/procmem.h"
#include "base/text.h"
#include "sampler_abi.h"

#define SYM_UNKNOWN	"[unknown]"	/* a frame whose memory could not be read */

struct symbolizer;

/* A symbolizer for one process running build b; NULL on ENOMEM. b must
 * outlive it; mem is copied. */
struct symbolizer *symbolizer__new(const struct lj_build *b, struct mem_reader mem);
void symbolizer__free(struct symbolizer *s);

/* Name each Lua frame with its current line too ("app.lua:update:42",
 * "app.lua:12:42" for one named by where it starts), where its pc is known:
 * a Lua frame's pc comes from the link of the frame above it; the leaf's
 * is known when the sampler recorded it (--lines) or a trace's snapshot
 * gave it. A frame without one keeps its name alone. */
void symbolizer__set_lines(struct symbolizer *s, bool on);

/* Whether a cached prototype may be used without reading its header again
 * (the caller flushes the caches whenever the target may have freed code:
 * the sampler, at each move of its GC epoch). Off, every use re-validates
 * the entry against the header as it is now. */
void symbolizer__trust(struct symbolizer *s, bool on);

/* The opcode classes of the BPF program's scan of a call site, by opcode
 * (enum nupp_site_op, n entries): all 0 when the build has no bytecode
 * modes. */
void symbolizer__site_ops(const struct symbolizer *s, __u8 *ops, size_t n);

/* Name C functions by their symbol, or their file and ELF address
 * (cfunc_names.h), instead of their address (dumpstack's "@0x…"). c is
 * not owned; NULL goes back to addresses. */
struct cfunc_names;
void symbolizer__set_cfunc_names(struct symbolizer *s, struct cfunc_names *c);

/* Drop all caches, e.g. after the target has reloaded its code. */
void symbolizer__flush(struct symbolizer *s);

/* Append the stack frames[0..depth) (innermost first) to out, outermost
 * first, ';' between frames. Returns how many frames rendered as SYM_UNKNOWN,
 * or -ENOMEM. */
int symbolizer__stack(struct symbolizer *s, const struct nupp_frame *frames,
		      int depth, struct strbuf *out);

/* The same for the innermost `shown` frames only; the frames beyond them
 * only name their callees (a stack cut at --depth keeps one more frame so
 * that its outermost shown frame is still named by its caller). */
int symbolizer__stack_cut(struct symbolizer *s, const struct nupp_frame *frames,
			  int depth, int shown, struct strbuf *out);

/* What a rendered frame is, beyond its text: what the formats that keep
 * more than a name (pprof, speedscope) need. */
enum sym_kind {
	SYM_KIND_LUA,		/* a Lua function */
	SYM_KIND_C,		/* a C function */
	SYM_KIND_BUILTIN,	/* a fast function or a bytecode builtin */
	SYM_KIND_UNREAD,	/* its memory could not be read: SYM_UNKNOWN */
};

struct sym_frame {
	size_t off, len;	/* its text in the stack: out->buf + off, len bytes */
	enum sym_kind kind;
	const char *chunk;	/* Lua: its chunk's name, path kept, unescaped; valid
				 * until the next call of the symbolizer */
	__u32 start_line;	/* Lua: the line the function starts at */
	__u32 line;		/* Lua: the line of the frame's pc, 0 unknown */
	__u64 addr;		/* C: the lua_CFunction */
};

/* symbolizer__stack_cut, and in info[0..shown) (outermost first) what each
 * frame is. */
int symbolizer__stack_info(struct symbolizer *s, const struct nupp_frame *frames,
			   int depth, int shown, struct strbuf *out, struct sym_frame *info);

/* Source line of bytecode position pos (index of the instruction in the
 * proto's bytecode, 0 = the function header) of proto pt, as lj_debug_line:
 * 0 when the proto has no line info or pos is out of range; -1 when memory
 * could not be read. */
int symbolizer__line(struct symbolizer *s, __u64 pt, __u32 pos);

/* Current line of a frame (debug_frameline): -1 when it is not a Lua
 * function, its pc is unknown or memory could not be read. */
int symbolizer__frame_line(struct symbolizer *s, const struct nupp_frame *fr);

/* Append "module:line" for bytecode position pos of proto pt, module as in
 * stack frames; "[builtin:x]" alone for a bytecode builtin. For a pc pointing
 * AT an instruction (J->pc, T->startpc), pos = (pc - (pt + pt_size)) / 4.
 * Returns 1 when it rendered as SYM_UNKNOWN, 0, or -ENOMEM. */
int symbolizer__loc(struct symbolizer *s, __u64 pt, __u32 pos, struct strbuf *out);

/* Frames rendered as SYM_UNKNOWN so far. */
__u64 symbolizer__unknown(const struct symbolizer *s);

/* A pointer as LuaJIT's "%p" prints it (lj_strfmt_wptr): "0x" and 8 hex
 * digits, 2 more per byte used above 32 bits, "NULL" for 0. Its length. */
#define SYMBOLIZE_PTR_MAX 19
int symbolize__fmt_ptr(char out[SYMBOLIZE_PTR_MAX], __u64 x);

#endif /* NUPP_SYMBOLIZE_H */
