/* SPDX-License-Identifier: MIT */
/*
 * check.h - `nupp-bpf check`: the trace aborts of a program found without
 * running it.
 *
 * The program is loaded to bytecode by the LuaJIT build that will run it
 * (bcdump.h), and its bytecode is read against what that build's trace
 * recorder refuses (lj_recorder.h): NYI bytecodes, builtins with no
 * recording handler (resolved through globals, locals, upvalues, fields
 * and require), builtins compiled for some arguments only. Each finding
 * is an abort site in the runtime collector's terms (trace_report.h): the
 * same reasonId, the same jit.v location.
 *
 * Severity: a blocker inside a loop predicts "blacklist" (the loop falls
 * out of the JIT once it is hot), outside one "warn"; one the recorder can
 * only reach after another blocker of the same loop is "info"; a stitch or
 * trace stop is "info".
 */
#ifndef NUPP_CHECK_H
#define NUPP_CHECK_H

#include <stddef.h>
#include <sys/types.h>
#include "luajit/bcdump.h"
#include "luajit/lj_build.h"
#include "luajit/lj_recorder.h"
#include "trace_reasons.h"

enum check_format { CHECK_CSV, CHECK_TEXT, CHECK_SARIF };

struct check_opts {
	const char *luajit;	/* the build that loads the files; NULL: luajit on PATH */
	pid_t pid;		/* check what process pid has loaded instead */
	char **paths;		/* files and directories */
	int npaths;
	enum check_format format;
	const char *output;	/* NULL or "-": stdout */
	const char *profile;	/* collapsed or pprof: order by samples */
};

struct check_finding {
	const char *severity;		/* "blacklist", "warn" or "info" */
	const struct trace_reason *row;	/* the catalog's row */
	char reason[192];		/* "NYI: bytecode FNEW" */
	char reason_id[160];		/* "trace.nyi-bytecode.FNEW" */
	char raw[192];			/* "NYI: bytecode 51", as the VM says it */
	char location[320];		/* jit.v's "file.lua:42" */
	const char *path;		/* the source as given (owned by the result) */
	int line;
	int loop_line;			/* the innermost enclosing loop's line, 0 none */
	int func_line;			/* the enclosing function's first line */
	int func_last;			/* and its last */
	int after_line;			/* info: reached only after the blocker there */
	int pc;				/* its bytecode position in the function */
	double samples;			/* --profile: its function's samples, -1 none */
	char chunk[128];		/* the chunk's file name, as profiles name it */
};

struct check_result {
	struct check_finding *f;
	size_t n, cap;
	char **paths;			/* the strings findings point to */
	size_t npaths;
};

/* What the bytecode is read against: a build's opcode names and modes, and
 * its recorder. */
struct check_ctx {
	const struct lj_build *b;
	const struct lj_recorder *rec;
	char **names;			/* every builtin name and dotted prefix, sorted */
	int nnames;
	int op[32];			/* opcodes by enum check_op (check.c) */
	unsigned char nyi[256];		/* by opcode: lj_record_ins leaves it NYI */
};

int check__ctx_init(struct check_ctx *c, const struct lj_build *b, const struct lj_recorder *rec,
		    char *err, size_t errsz);
void check__ctx_free(struct check_ctx *c);

/* Add the findings of one chunk, loaded from path ("" when it has none). */
int check__chunk(const struct check_ctx *c, const struct bc_chunk *ch, const char *path,
		 struct check_result *r);

void check__result_free(struct check_result *r);

/* Add the findings of every prototype process pid has loaded, read from its
 * memory with the build's layout lj (check_proc.c). 0, or -1 with err. */
int check__process(pid_t pid, const struct check_ctx *c, const struct lj_layout *lj,
		   struct check_result *r, char *err, size_t errsz);

/* Whether a finding is a blocker the recorder will meet (exit status 1). */
int check__is_blocker(const struct check_finding *f);

/* The CLI: exit status 0 (no blocker), 1 (a blocker), 2 (an error). */
int check__run(const struct check_opts *o);

#endif
