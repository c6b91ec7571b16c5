/* The per-CPU self-counters map and helpers, included by each Vigil BPF program. */
#pragma once
#include "probe_stats.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VIGIL_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} probe_stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&probe_stats, &idx);

	if (v)
		*v += 1; /* vigil: per-cpu map probe_stats (only this CPU writes its slot) */
}

/* Adds to a hash map's value at key, creating a zeroed value first. */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}
