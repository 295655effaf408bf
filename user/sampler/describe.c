// SPDX-License-Identifier: MIT
/* describe.c - what the BPF sampler is told of a build (describe.h). */
#include "describe.h"
#include "luajit/lj_build.h"

int describe__layout(const struct lj_layout *lj, const struct symbolizer *sym,
		     struct nupp_proc *proc)
{
	const __u32 Lf[] = { lj->L_base, lj->L_stack, lj->L_maxstack, lj->L_cframe };
	/* The main lua_State is the first member of GG_State. */
	const __u32 ggf[] = {
		lj->L_base, lj->L_stack, lj->L_maxstack, lj->L_cframe,
		lj->gg_g + lj->g_vmstate, lj->gg_g + lj->g_cur_L, lj->gg_g + lj->g_jit_base,
	};

	*proc = (struct nupp_proc){ .lj = *lj };
	/* The sampler reads these fields in one block each. */
	if (lj_block_of(ggf, sizeof(ggf) / sizeof(ggf[0]), NUPP_GG_BLK, &proc->gg_blk,
			&proc->gg_len) ||
	    lj_block_of(Lf, sizeof(Lf) / sizeof(Lf[0]), NUPP_BLK, &proc->L_blk, &proc->L_len))
		return -1;
	symbolizer__site_ops(sym, proc->site_ops, sizeof(proc->site_ops));
	return 0;
}
