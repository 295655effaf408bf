/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * counters.h - a BPF program's per-CPU event counters, read and summed by
 * userspace (map `counters`, index = the program's counter enum). The
 * includer defines NUPP_COUNTERS, their number, first.
 */
#ifndef NUPP_COUNTERS_H
#define NUPP_COUNTERS_H

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NUPP_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count_n(__u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += n;
}

static __always_inline void count(__u32 idx)
{
	count_n(idx, 1);
}

#endif /* NUPP_COUNTERS_H */
