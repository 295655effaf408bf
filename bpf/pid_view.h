/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * pid_view.h - process and thread ids as nupp-bpf names them.
 *
 * task->tgid, task->pid and bpf_get_current_pid_tgid() are ids in the
 * initial PID namespace. A nupp-bpf that runs in a container (its own PID
 * namespace: Docker, a pod, unshare --pid) names its targets, and reads
 * /proc, by the ids of its own namespace: compared with the host's, they
 * match nothing and the profile comes back empty. So the programs compare
 * ids in the namespace nupp-bpf lives in.
 *
 * learn_pid_view, run once by userspace after the load (BPF_PROG_TEST_RUN
 * runs a raw_tp program in the calling task), sets view_level, the depth of
 * nupp-bpf's own namespace (0: the initial one, where task->tgid is the id
 * and nothing more is read), and view_ns_inum, its inode number. /proc
 * cannot tell the depth: a container's own /proc lists its ids alone.
 * System calls (kill, perf_event_open, process_vm_readv) take ids of the
 * caller's own namespace too; a /proc of another namespace is refused
 * before anything is attached (privileges.c). A
 * task's struct pid holds its number at every level from 0 to its own
 * (pid->numbers[]); the number at view_level is nupp-bpf's id for it when
 * the namespace at that level is nupp-bpf's. A task outside that namespace
 * and its descendants has no id there: 0, which no target has.
 * bpf_get_ns_current_pid_tgid() would answer only for tasks whose own
 * namespace is nupp-bpf's, not for those of a container nested in it.
 */
#ifndef NUPP_PID_VIEW_H
#define NUPP_PID_VIEW_H

__u32 view_level;	/* 0: ids are the kernel's own */
__u32 view_ns_inum;
__u32 view_learned;	/* userspace checks that learn_pid_view ran */

/* The number of struct pid *pid_addr at view_level, if that level is
 * nupp-bpf's namespace. A global function: its struct upid stays off the
 * stack of the programs that call it (the sampler's must stay under 64
 * bytes, kernel-notes/sampler.md), and it takes the pointer as a number,
 * as a global function must. */
__noinline int nr_in_view(__u64 pid_addr)
{
	const struct pid *pid = (const struct pid *)pid_addr;
	struct upid up;

	if (!pid || BPF_CORE_READ(pid, level) < view_level)
		return 0;
	if (bpf_probe_read_kernel(&up, sizeof(up), (const char *)pid +
				  bpf_core_field_offset(struct pid, numbers) +
				  (__u64)view_level * bpf_core_type_size(struct upid)))
		return 0;
	if (!up.ns || BPF_CORE_READ(up.ns, ns.inum) != view_ns_inum)
		return 0;
	return up.nr;
}

/* task's process id (its tgid) as nupp-bpf names it; 0 if it has none.
 * task is a trusted pointer (bpf_get_current_task_btf): in the initial
 * namespace its tgid is one load, as the sampler's hot path had it. */
static __always_inline __u32 view_tgid(const struct task_struct *task)
{
	if (!view_level)
		return task->tgid;
	return nr_in_view((__u64)BPF_CORE_READ(task, group_leader, thread_pid));
}

/* task's thread id as nupp-bpf names it; 0 if it has none. */
static __always_inline __u32 view_tid(const struct task_struct *task)
{
	if (!view_level)
		return task->pid;
	return nr_in_view((__u64)BPF_CORE_READ(task, thread_pid));
}

/* The running task's ids as bpf_get_current_pid_tgid() packs them: the
 * process id in the upper half, the thread id in the lower. */
static __always_inline __u64 view_current_pid_tgid(void)
{
	const struct task_struct *task;

	if (!view_level)
		return bpf_get_current_pid_tgid();
	task = bpf_get_current_task_btf();
	return (__u64)view_tgid(task) << 32 | view_tid(task);
}

/* The calling task's PID namespace: the one at its pid's own level. */
SEC("raw_tp")
int learn_pid_view(void *ctx)
{
	const struct task_struct *task = bpf_get_current_task_btf();
	const struct pid *pid = BPF_CORE_READ(task, thread_pid);
	__u32 level = BPF_CORE_READ(pid, level);
	struct upid up;

	if (bpf_probe_read_kernel(&up, sizeof(up), (const char *)pid +
				  bpf_core_field_offset(struct pid, numbers) +
				  (__u64)level * bpf_core_type_size(struct upid)) || !up.ns)
		return 0;
	view_ns_inum = BPF_CORE_READ(up.ns, ns.inum);
	view_level = level;
	view_learned = 1;
	return 0;
}

#endif
