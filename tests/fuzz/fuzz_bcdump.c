// SPDX-License-Identifier: MIT
/*
 * fuzz_bcdump.c - bcdump__parse (user/luajit/bcdump.c) over bytes the fuzzer makes:
 * a bytecode dump is data another process wrote (check loads files with
 * whatever luajit it is given). Whatever the bytes, the parse ends, reads
 * nothing outside them (ASan), and what it accepts is consistent: every
 * child constant names an earlier prototype whose parent is the one holding
 * it, the main chunk is the last and has no parent, and each prototype's
 * lines and names are there to read. An accepted dump is then read by the
 * analysis (check__chunk) against Debian luajit's opcodes and recorder.
 *
 * Seeds: real dumps of the fixtures (tests/fuzz/corpus/bcdump/).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "luajit/bcdump.h"
#include "check/check.h"

static struct check_ctx ctx;
static int ready;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bc_chunk ch;
	struct check_result r = { 0 };
	char err[256];

	if (!ready) {
		const struct lj_build *b = &lj_known_builds[0];
		static const char *const none[] = { NULL };
		/* A recorder of the shape the generated ones have: the test is of
		 * the reader, not of one build's data. */
		static const struct lj_rec_builtin builtins[] = { { "string.gsub", LJ_REC_NYI },
								  { "string.format", LJ_REC_PARTIAL } };
		static const char *const nyi[] = { "FNEW", "UCLO", NULL };
		static const struct lj_recorder rec = { builtins, 2, nyi, 1, 1, 0, none, none, 0, 1, 28 };

		if (check__ctx_init(&ctx, b, &rec, err, sizeof(err)))
			abort();
		ready = 1;
	}
	if (bcdump__parse(data, size, &ch, err, sizeof(err)))
		return 0;
	if (ch.nprotos < 1 || ch.protos[ch.nprotos - 1].parent != -1)
		abort();
	for (int i = 0; i < ch.nprotos; i++) {
		const struct bc_proto *pt = &ch.protos[i];

		for (int k = 0; k < pt->nkgc; k++)
			if (pt->kgc[k].type == BC_KGC_CHILD &&
			    (pt->kgc[k].child >= i || ch.protos[pt->kgc[k].child].parent != i))
				abort();
		for (int j = 0; j < pt->nins; j++)
			(void)pt->line[j];
		for (int u = 0; u < pt->nuv; u++)
			(void)strlen(pt->uvname[u]);
	}
	check__chunk(&ctx, &ch, "fuzz.lua", &r);
	check__result_free(&r);
	bcdump__free(&ch);
	return 0;
}
