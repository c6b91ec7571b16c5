// SPDX-License-Identifier: GPL-2.0
/* Never loaded: a fixture for tests/agent/check_bpf_atomics.py, which must flag the lines tagged
 * below as expected-flagged, and no other (ctest bpf_atomics_flags_racy). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct counter {
	__u64 n;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct counter);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} per_cpu SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int racy(void *ctx)
{
	__u32 key = 0;
	struct counter *v = bpf_map_lookup_elem(&counters, &key);
	__u64 *c;

	if (v) {
		v->n++; /* EXPECT-FLAGGED: a lost update between two CPUs */
		__sync_fetch_and_add(&v->bytes, 64);
		/* A marker naming a map that is not per-CPU exempts nothing. */
		v->bytes += 1; /* vigil: per-cpu map counters */ /* EXPECT-FLAGGED: a hash map */
	}
	c = bpf_map_lookup_elem(&per_cpu, &key);
	if (c)
		*c += 1; /* vigil: per-cpu map per_cpu */
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
