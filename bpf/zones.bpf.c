// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * zones.bpf.c - holds the zone gate of a target open.
 *
 * nupp.profile.zone records zone paths only while the USDT semaphore of its
 * probe nupp:zone is nonzero. Attaching this program to the probe makes the
 * kernel increment the semaphore; detaching (also when nupp-bpf dies) makes
 * it decrement it. The program itself has nothing to do: zone ids and paths
 * are read from the target's memory (user/zones/zones.c).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/usdt.bpf.h>

SEC("usdt")
int BPF_USDT(on_zone_register, __u32 id, const char *path)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
