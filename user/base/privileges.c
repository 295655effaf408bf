// SPDX-License-Identifier: MIT
/* privileges.c - may this process load BPF programs and name processes? */
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

/* Whether /proc names processes by this process's own ids. System calls
 * (kill, perf_event_open, process_vm_readv) and the BPF programs
 * (bpf/pid_view.h) take ids of the caller's PID namespace; a /proc mounted
 * in another one (unshare --pid without --mount-proc, a host's /proc bound
 * into a container) would name other processes by the same numbers. */
static bool proc_is_own(void)
{
	char link[32];
	ssize_t n = readlink("/proc/self", link, sizeof(link) - 1);
	int pid;

	if (n <= 0)
		return false;
	link[n] = '\0';
	return sscanf(link, "%d", &pid) == 1 && pid == getpid();
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
	if (!proc_is_own()) {
		*why = "/proc belongs to another PID namespace than nupp-bpf's: "
		       "mount one of its own (unshare --pid --fork --mount-proc)";
		return false;
	}
	return true;
}
