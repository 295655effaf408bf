// SPDX-License-Identifier: MIT
/*
 * vm_coroutines.c - the interpreter's own coroutine switches (vm_coroutines.h).
 *
 * coroutine.yield, coroutine.resume and the function coroutine.wrap returns
 * are fast functions in the VM's assembly (vm_x64.dasc): no symbol names
 * them, in any build, and the JIT never compiles them (recff_nyi). Their
 * first instructions in a GC64 build (BASE in rdx, NARGS+1 in eax, RB in
 * rbp; "cleartp" is shl 17, shr 17):
 *
 *   coroutine.yield     mov rbp, [rsp+SAVE_L]
 *                       test qword [rbp+cframe], 1   ; CFRAME_RESUME
 *                       je ->fff_fallback            ; probed: rbp = L
 *   coroutine.resume    cmp eax, 2 / jb ->fff_fallback
 *                       mov rbp, [rdx] / cleartp rbp  ; the coroutine
 *                       ... (the argument's type checked)
 *                       cmp qword [rbp+cframe], 0
 *                       jne ->fff_fallback           ; probed: rbp = co
 *   wrap's function     mov rbp, [rdx-16] / cleartp rbp   ; itself
 *                       mov rbp, [rbp+upvalue0] / cleartp rbp
 *                       ... cmp qword [rbp+cframe], 0 / jne  ; probed
 *
 * Each is found by decoding the interpreter blob and matching these
 * instructions with the layout's L->cframe offset; a match must be unique.
 * The probe goes on the conditional jump: the kernel emulates a jcc rather
 * than single-stepping it, no jump in the blob lands between the head and
 * it, and no instruction there writes rbp but the tag's clearing. At the
 * yield's je the VM's registers are as at the function's entry, so its
 * stack walks as a sample's in the interpreter does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "vm_coroutines.h"
#include "x86_code.h"

#define TAIL_WINDOW	16	/* the head .. the cframe test's jne */

static bool reg_is(const struct opnd *o, int reg, int size)
{
	return o->type == X86_OP_REG && o->reg == reg && o->size == size;
}

static bool mem_is(const struct opnd *o, int base, __s64 disp)
{
	return o->type == X86_OP_MEM && o->base == base && o->index == NO_REG && o->v == disp;
}

/* mov rbp, qword [base + disp] */
static bool loads_rbp(const struct ins *in, int base, __s64 disp)
{
	return in->id == X86_INS_MOV && reg_is(&in->op[0], CODE_SITE_RBP, 8) &&
	       mem_is(&in->op[1], base, disp) && in->op[1].size == 8;
}

static bool clears_tag(const struct ins *in)
{
	return (in->id == X86_INS_SHL || in->id == X86_INS_SHR) &&
	       reg_is(&in->op[0], CODE_SITE_RBP, 8) && in->op[1].type == X86_OP_IMM &&
	       in->op[1].v == 17;
}

/* coroutine.yield's head at v[i]: the je, or NULL. */
static const struct ins *yield_at(const struct ins *v, size_t n, size_t i,
				  const struct lj_layout *lj)
{
	if (i + 2 >= n || v[i].id != X86_INS_MOV || !reg_is(&v[i].op[0], CODE_SITE_RBP, 8) ||
	    v[i].op[1].type != X86_OP_MEM || v[i].op[1].base != CODE_SITE_RSP ||
	    v[i].op[1].index != NO_REG || v[i].op[1].v <= 0)
		return NULL;
	if (v[i + 1].id != X86_INS_TEST || !mem_is(&v[i + 1].op[0], CODE_SITE_RBP, lj->L_cframe) ||
	    v[i + 1].op[0].size != 8 || v[i + 1].op[1].type != X86_OP_IMM || v[i + 1].op[1].v != 1)
		return NULL;
	if (v[i + 2].id != X86_INS_JE || (v[i + 1].flags | v[i + 2].flags) & IN_LABEL)
		return NULL;
	return &v[i + 2];
}

/* From v[i] on, after a head that left the coroutine in rbp: the jne of
 * `cmp qword [rbp+cframe], 0`, or NULL. */
static const struct ins *cframe_jne(const struct ins *v, size_t n, size_t i,
				    const struct lj_layout *lj)
{
	for (size_t k = i; k < n && k < i + TAIL_WINDOW; k++) {
		const struct ins *in = &v[k];

		if (in->flags & (IN_LABEL | IN_STOP | IN_CALL))
			return NULL;
		if (in->id == X86_INS_CMP && mem_is(&in->op[0], CODE_SITE_RBP, lj->L_cframe) &&
		    in->op[0].size == 8 && in->op[1].type == X86_OP_IMM && in->op[1].v == 0)
			return k + 1 < n && v[k + 1].id == X86_INS_JNE &&
			       !(v[k + 1].flags & IN_LABEL) ? &v[k + 1] : NULL;
		if ((in->wregs >> CODE_SITE_RBP & 1) && !clears_tag(in))
			return NULL;
	}
	return NULL;
}

/* coroutine.resume's head at v[i]: the jne, or NULL. */
static const struct ins *resume_at(const struct ins *v, size_t n, size_t i,
				   const struct lj_layout *lj)
{
	if (i + 3 >= n || v[i].id != X86_INS_CMP || !reg_is(&v[i].op[0], CODE_SITE_RAX, 4) ||
	    v[i].op[1].type != X86_OP_IMM || v[i].op[1].v != 2 || v[i + 1].id != X86_INS_JB ||
	    !loads_rbp(&v[i + 2], CODE_SITE_RDX, 0) || !clears_tag(&v[i + 3]))
		return NULL;
	return cframe_jne(v, n, i + 3, lj);
}

/* The head of the function coroutine.wrap returns at v[i]: the jne, or NULL. */
static const struct ins *wrap_at(const struct ins *v, size_t n, size_t i,
				 const struct lj_layout *lj)
{
	size_t k = i + 1;

	if (!loads_rbp(&v[i], CODE_SITE_RDX, -16))
		return NULL;
	while (k < n && clears_tag(&v[k]))
		k++;
	if (k == i + 1 || k >= n || v[k].id != X86_INS_MOV || !reg_is(&v[k].op[0], CODE_SITE_RBP, 8) ||
	    v[k].op[1].type != X86_OP_MEM || v[k].op[1].base != CODE_SITE_RBP ||
	    v[k].op[1].index != NO_REG || v[k].op[1].v <= 0 || (v[k].flags & IN_LABEL))
		return NULL;
	if (k + 1 >= n || !clears_tag(&v[k + 1]))
		return NULL;
	return cframe_jne(v, n, k + 1, lj);
}

typedef const struct ins *(*head_fn)(const struct ins *, size_t, size_t, const struct lj_layout *);

/* The one site head() finds in the blob decoded in f->fn; 0 and why said
 * when there is none or more than one. */
static __u64 unique_site(struct cfile *f, head_fn head, const char *name, char *why, size_t whysz)
{
	__u64 site = 0;
	int found = 0;

	for (size_t i = 0; i < f->fn.n; i++) {
		const struct ins *j = head(f->fn.v, f->fn.n, i, f->lj);

		if (j && found++ == 0)
			site = j->addr;
	}
	if (found == 1)
		return site;
	if (!*why)
		snprintf(why, whysz, "%s's code found %d times in the interpreter, not once", name,
			 found);
	return 0;
}

static struct {
	pthread_mutex_t lock;
	struct stat st;
	__u32 L_cframe;
	struct vm_coroutine_sites sites;
	bool valid;
} last = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static void find(const char *path, const struct lj_layout *lj, struct vm_coroutine_sites *out)
{
	struct cfile f;
	char err[160] = "";

	memset(out, 0, sizeof(*out));
	if (cfile__open(&f, path, lj, err, sizeof(err)) || cfile__find_vm(&f, err, sizeof(err)) ||
	    cfile__decode_fn(&f, f.vm_lo, f.vm_hi, true)) {
		snprintf(out->why, sizeof(out->why), "its interpreter cannot be read: %s",
			 *err ? err : "it does not decode");
		cfile__close(&f);
		return;
	}
	out->yield = unique_site(&f, yield_at, "coroutine.yield", out->why, sizeof(out->why));
	out->resume = unique_site(&f, resume_at, "coroutine.resume", out->why, sizeof(out->why));
	out->wrap = unique_site(&f, wrap_at, "coroutine.wrap's function", out->why, sizeof(out->why));
	cfile__close(&f);
}

int vm_coroutines__find(const char *path, const struct lj_layout *lj,
			struct vm_coroutine_sites *out)
{
	struct stat st;

	if (stat(path, &st)) {
		memset(out, 0, sizeof(*out));
		snprintf(out->why, sizeof(out->why), "cannot read %s", path);
		return -1;
	}
	pthread_mutex_lock(&last.lock);
	if (!last.valid || !same_file(&st, &last.st) || last.L_cframe != lj->L_cframe) {
		find(path, lj, &last.sites);
		last.st = st;
		last.L_cframe = lj->L_cframe;
		last.valid = true;
	}
	*out = last.sites;
	pthread_mutex_unlock(&last.lock);
	return out->yield && out->resume && out->wrap ? 0 : -1;
}
