/* Types shared by cuda.bpf.c and the agent: CUDA driver API calls, per-process memory state and
 * the failure context sent to user space. */
#pragma once

/* Which driver entry point a probe is on; passed as the uprobe's BPF cookie. */
enum cuda_fn {
	CUDA_FN_MEM_ALLOC = 0,        /* cuMemAlloc_v2 */
	CUDA_FN_MEM_ALLOC_PITCH,      /* cuMemAllocPitch_v2 */
	CUDA_FN_MEM_ALLOC_ASYNC,      /* cuMemAllocAsync(_ptsz) */
	CUDA_FN_MEM_ALLOC_FROM_POOL,  /* cuMemAllocFromPoolAsync(_ptsz) */
	CUDA_FN_MEM_ALLOC_MANAGED,    /* cuMemAllocManaged */
	CUDA_FN_MEM_FREE,             /* cuMemFree_v2 */
	CUDA_FN_MEM_FREE_ASYNC,       /* cuMemFreeAsync(_ptsz) */
	CUDA_FN_MEM_CREATE,           /* cuMemCreate */
	CUDA_FN_MEM_RELEASE,          /* cuMemRelease */
	CUDA_FN_MEM_MAP,              /* cuMemMap */
	CUDA_FN_MEM_UNMAP,            /* cuMemUnmap */
	CUDA_FN_MEM_ADDRESS_RESERVE,  /* cuMemAddressReserve */
	CUDA_FN_MEM_ADDRESS_FREE,     /* cuMemAddressFree */
	CUDA_FN_STREAM_BEGIN_CAPTURE, /* cuStreamBeginCapture_v2(_ptsz) */
	CUDA_FN_STREAM_END_CAPTURE,   /* cuStreamEndCapture(_ptsz) */
	CUDA_FN_GRAPH_INSTANTIATE,    /* cuGraphInstantiateWithFlags, _WithParams(_ptsz), _v2 */
	CUDA_FN_GRAPH_LAUNCH,         /* cuGraphLaunch(_ptsz) */
	CUDA_FN_GRAPH_EXEC_UPDATE,    /* cuGraphExecUpdate_v2 */
	CUDA_FN_MAX,
};

/* Slots in cuda_proc.calls: a power of two, so the BPF side can mask the cookie into bounds. */
#define CUDA_FN_SLOTS 32

#define CUDA_SMALL_ALLOC_BYTES 4096 /* the source document's "small allocation" */
#define CUDA_HIST_BUCKETS 42        /* log2 buckets: le 2^0 .. 2^40, then +Inf */
/* Entries one process may hold in the live and handles tables (262,144 and 65,536 for the node):
 * half the live table, so one process cannot take every other's room. PyTorch's caching allocator
 * holds a few thousand driver blocks; past the cap allocations are counted untracked. */
#define CUDA_LIVE_ENTRIES_PER_PROCESS 131072

struct cuda_proc {
	__u64 calls[CUDA_FN_SLOTS]; /* by enum cuda_fn */
	__u64 allocs;              /* successful allocations (driver allocs and cuMemCreate) */
	__u64 small_allocs;        /* ... of at most CUDA_SMALL_ALLOC_BYTES */
	__u64 alloc_bytes;         /* sum of their sizes */
	__u64 live_bytes;          /* driver allocations not yet freed */
	__u64 vmm_physical_bytes;  /* cuMemCreate'd and not released */
	__u64 vmm_mapped_bytes;    /* cuMemMap'ped and not unmapped */
	__u64 vmm_reserved_bytes;  /* cuMemAddressReserve'd and not freed */
	__u64 allocs_in_capture;   /* allocation calls while a stream capture was open */
	__s64 open_captures;       /* captures begun and not yet ended */
	__s64 live_entries;        /* its entries in the live and handles tables */
	__u64 untracked_allocs;    /* allocations not kept there (its cap, or the table full): their
	                            * bytes are in alloc_bytes but not in the live gauges */
	__u64 size_hist[CUDA_HIST_BUCKETS];
	char comm[16]; /* labels series of processes that exit before the agent reads /proc */
};

struct cuda_err_key {
	__u32 tgid;
	__u32 fn;
	__s32 result;
	__u32 pad;
};

/* Sent for every failed call: the context the counters cannot carry. */
struct cuda_failure {
	__u64 ts_ns;
	__u32 tgid;
	__u32 tid;
	__u32 fn;
	__s32 result;
	__u64 stream;  /* CUstream, when the call has one */
	__u64 graph;   /* CUgraph / CUgraphExec, when the call has one */
	__u64 size;
	char comm[16];
};
