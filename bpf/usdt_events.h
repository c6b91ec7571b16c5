/* Types shared by usdt.bpf.c and the agent: caching-allocator state from USDT probes. */
#pragma once

enum usdt_allocator {
	USDT_ALLOC_PYTORCH = 0, /* pytorch:malloc(ptr, device, size, stream) / pytorch:free(ptr) */
	USDT_ALLOC_VIGIL = 1,   /* vigil:alloc_block_alloc/free(address, bytes), vigil:alloc_snapshot */
	USDT_ALLOC_MAX,
};

/* A device index the probe does not give: the worker's allocator, a block freed that was handed
 * out before the agent attached. */
#define USDT_DEVICE_UNKNOWN -1

struct usdt_alloc_key {
	__u32 tgid;
	__u32 allocator;
	__s32 device; /* PyTorch's c10::DeviceIndex; USDT_DEVICE_UNKNOWN */
	__u32 pad;
};

/* A live block: its size and the device it was handed out on (a free names only the pointer). */
struct usdt_block {
	__u64 size;
	__s32 device;
	__u32 pad;
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
