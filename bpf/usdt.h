/* Types shared by usdt.bpf.c and the agent: caching-allocator state from USDT probes. */
#pragma once

enum usdt_allocator {
	USDT_ALLOC_PYTORCH = 0, /* pytorch:malloc(ptr, size) / pytorch:free(ptr) */
	USDT_ALLOC_VIGIL = 1,   /* vigil:alloc_block_alloc/free(address, bytes), vigil:alloc_snapshot */
	USDT_ALLOC_MAX,
};

struct usdt_alloc_key {
	__u32 tgid;
	__u32 allocator;
};

struct usdt_alloc_state {
	__u64 mallocs;
	__u64 frees;
	__u64 allocated_bytes;     /* live blocks handed out, from malloc/free pairs */
	/* From vigil:alloc_snapshot (the allocator's own account; 0 when it has none). */
	__u64 snapshots;
	__u64 reserved_bytes;
	__u64 snapshot_allocated_bytes;
	__u64 largest_free_block_bytes;
	char comm[16];
};
