/* SPDX-License-Identifier: MIT */
/*
 * ksyms.h - the running kernel's symbols, from /proc/kallsyms: an address
 * by name, a name by address (the function holding it).
 *
 *	struct ksyms *k = ksyms__load();
 *	lo = ksyms__addr(k, "__sched_text_start");
 *	name = ksyms__name(k, ip);		// "pipe_read", NULL outside
 *	ksyms__free(k);
 *
 * Addresses are 0 unless read with CAP_SYSLOG (kptr_restrict): a caller
 * that needs them checks for 0.
 */
#ifndef NUPP_KSYMS_H
#define NUPP_KSYMS_H

#include <stdbool.h>
#include <linux/types.h>

struct ksyms;

/* NULL when /proc/kallsyms cannot be read (errno says why). */
struct ksyms *ksyms__load(void);
void ksyms__free(struct ksyms *k);
/* The address of a function or variable named name; 0 when none. */
__u64 ksyms__addr(const struct ksyms *k, const char *name);
/* The first symbol whose name is prefix, or prefix followed by a '.'
 * (a compiler's clone: "finish_task_switch.isra.0"); NULL when none. */
const char *ksyms__clone_of(const struct ksyms *k, const char *prefix);
/* The name of the text symbol holding addr; NULL when none does. */
const char *ksyms__name(const struct ksyms *k, __u64 addr);

/* The addresses of a few symbols of the kernel itself (not of modules),
 * in one pass that builds no table and ends once all are found: addrs[i]
 * for names[i], 0 where none. 0, or -errno when /proc/kallsyms cannot be
 * read. */
int ksyms__lookup(const char *const names[], __u64 addrs[], int n);

#endif /* NUPP_KSYMS_H */
