// SPDX-License-Identifier: MIT
/* privileges.c - may this process load BPF programs? */
#include <stdio.h>
#include <unistd.h>
#include "privileges.h"

#define CAP_SYS_ADMIN	21
#define CAP_PERFMON	38
#define CAP_BPF		39

/* The effective capability set, from /proc/self/status. */
static unsigned long long effective_caps(void)
{
	char line[256];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return geteuid() == 0 ? ~0ULL : 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff;
}

bool privileges__bpf(const char **why)
{
	unsigned long long eff = effective_caps();

	if (!(eff >> CAP_SYS_ADMIN & 1) && !((eff >> CAP_BPF & 1) && (eff >> CAP_PERFMON & 1))) {
		*why = "loading BPF programs needs root (or CAP_BPF and CAP_PERFMON)";
		return false;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		*why = "the kernel has no BTF (/sys/kernel/btf/vmlinux): nupp-bpf needs CONFIG_DEBUG_INFO_BTF";
		return false;
	}
	return true;
}
