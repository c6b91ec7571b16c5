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

	/* The compiler may place the store's line on the test: both carry the marker. */
	if (v) /* vigil: per-cpu map probe_stats */
		*v += 1; /* vigil: per-cpu map probe_stats (only this CPU writes its slot) */
}

#define VIGIL_E2BIG 7 /* what a full hash table answers an insert */

/* Inserts into a hash table; a refusal because it is full is counted (VIGIL_STAT_TABLE_FULL). */
static __always_inline long insert_counted(void *map, const void *key, const void *value, __u64 flags)
{
	long err = bpf_map_update_elem(map, key, value, flags);

	if (err == -VIGIL_E2BIG)
		stat_inc(VIGIL_STAT_TABLE_FULL);
	return err;
}

/* Adds to a hash map's value at key, creating a zeroed value first; 0 when the table is full. */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	insert_counted(map, key, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}
