// SPDX-License-Identifier: GPL-2.0
/* Caching allocators through their USDT probes (semaphore-gated; libbpf sets the semaphore
 * through the uprobe reference counter): PyTorch's pytorch:malloc/free and the worker's
 * vigil:alloc_block_alloc/free and vigil:alloc_snapshot. Live blocks are kept per process so a
 * free knows its size and device. PyTorch's layout, from c10/cuda/CUDACachingAllocator.cpp:
 * TORCH_SDT_WITH_SEMAPHORE(malloc, devPtr, device, size, stream.id()) with device a
 * c10::DeviceIndex (int8), size a size_t, the stream id an int64; TORCH_SDT_WITH_SEMAPHORE(free, ptr). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
/* libbpf's pool of USDT argument specs for this object (256 by default): every attached site may
 * take one until its link is destroyed; the agent keeps its attachments within it (FileLinks). */
#define BPF_USDT_MAX_SPEC_CNT 1024
#include <bpf/usdt.bpf.h>
#include "usdt_events.h"
#include "probe_stats.bpf.h"

struct block_key {
	__u32 tgid;
	__u32 allocator;
	__u64 ptr;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct block_key);
	__type(value, struct usdt_block);
} blocks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct usdt_alloc_key);
	__type(value, struct usdt_alloc_state);
} allocators SEC(".maps");

static __always_inline struct usdt_alloc_state *state_of(__u32 allocator, __s32 device, __u32 *tgid)
{
	static const struct usdt_alloc_state zero;
	struct usdt_alloc_key k = {
		.tgid = bpf_get_current_pid_tgid() >> 32, .allocator = allocator, .device = device,
	};
	struct usdt_alloc_state *s;

	stat_inc(VIGIL_STAT_EVENTS);
	*tgid = k.tgid;
	s = lookup_or_init(&allocators, &k, &zero);
	if (s && !s->comm[0])
		bpf_get_current_comm(s->comm, sizeof(s->comm));
	return s;
}

static __always_inline int on_malloc(__u32 allocator, __u64 ptr, __s32 device, __u64 size)
{
	__u32 tgid;
	struct usdt_alloc_state *s = state_of(allocator, device, &tgid);
	struct block_key k = { .allocator = allocator, .ptr = ptr };
	struct usdt_block b = { .size = size, .device = device };

	if (!s)
		return 0;
	k.tgid = tgid;
	bpf_map_update_elem(&blocks, &k, &b, BPF_ANY);
	__sync_fetch_and_add(&s->mallocs, 1);
	__sync_fetch_and_add(&s->allocated_bytes, size);
	return 0;
}

static __always_inline int on_free(__u32 allocator, __u64 ptr)
{
	struct block_key k = { .tgid = bpf_get_current_pid_tgid() >> 32, .allocator = allocator, .ptr = ptr };
	struct usdt_alloc_state *s;
	struct usdt_block *b;
	__u32 tgid;

	b = bpf_map_lookup_elem(&blocks, &k);
	/* Not seen handed out (allocated before the agent attached): counted, on no device. */
	s = state_of(allocator, b ? b->device : USDT_DEVICE_UNKNOWN, &tgid);
	if (!s)
		return 0;
	__sync_fetch_and_add(&s->frees, 1);
	if (!b)
		return 0;
	__sync_fetch_and_sub(&s->allocated_bytes, b->size);
	bpf_map_delete_elem(&blocks, &k);
	return 0;
}

SEC("usdt")
int BPF_USDT(pytorch_malloc, __u64 ptr, int device, __u64 size, __s64 stream)
{
	return on_malloc(USDT_ALLOC_PYTORCH, ptr, device, size);
}

SEC("usdt")
int BPF_USDT(pytorch_free, __u64 ptr)
{
	return on_free(USDT_ALLOC_PYTORCH, ptr);
}

SEC("usdt")
int BPF_USDT(vigil_block_alloc, __u64 address, __u64 bytes)
{
	return on_malloc(USDT_ALLOC_VIGIL, address, USDT_DEVICE_UNKNOWN, bytes);
}

SEC("usdt")
int BPF_USDT(vigil_block_free, __u64 address)
{
	return on_free(USDT_ALLOC_VIGIL, address);
}

SEC("usdt")
int BPF_USDT(vigil_alloc_snapshot, __u64 reserved, __u64 allocated, __u64 largest_free)
{
	__u32 tgid;
	struct usdt_alloc_state *s = state_of(USDT_ALLOC_VIGIL, USDT_DEVICE_UNKNOWN, &tgid);

	if (!s)
		return 0;
	__sync_fetch_and_add(&s->snapshots, 1);
	s->reserved_bytes = reserved;
	s->snapshot_allocated_bytes = allocated;
	s->largest_free_block_bytes = largest_free;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
