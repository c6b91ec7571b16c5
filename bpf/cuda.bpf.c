// SPDX-License-Identifier: GPL-2.0
/* CUDA driver API in libcuda.so.1: allocations (classic, async, pool, managed, VMM), stream
 * capture and graphs. One entry and one return program serve every entry point; the uprobe's
 * cookie says which function it is on. Counting happens here; failures go to a ring buffer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "cuda_events.h"
#include "log2.bpf.h"
#include "probe_stats.bpf.h"
#include "atomic.bpf.h"
#include "uprobe_calls.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct cuda_proc);
} procs SEC(".maps");

struct ptr_key {
	__u32 tgid;
	__u32 pad;
	__u64 ptr; /* CUdeviceptr, or a CUmemGenericAllocationHandle */
};

/* Live driver allocations: pointer -> size, so a free knows what it returns. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct ptr_key);
	__type(value, __u64);
} live SEC(".maps");

/* Live VMM physical allocations: handle -> size (cuMemRelease has no size argument). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ptr_key);
	__type(value, __u64);
} handles SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cuda_err_key);
	__type(value, __u64);
} errors SEC(".maps");

/* When the accounting in these maps began (CLOCK_BOOTTIME ns, written by the first agent that
 * created them; pinned with them): a process started earlier may have allocated unseen. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} since SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} failures SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(cuda_enter)
{
	return save_call(ctx);
}

static __always_inline __u64 read_user_u64(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)addr);
	return v;
}

static __always_inline void count_alloc(struct cuda_proc *p, __u64 size)
{
	__u64 b = log2_ceil(size);

	__sync_fetch_and_add(&p->allocs, 1);
	__sync_fetch_and_add(&p->alloc_bytes, size);
	if (size <= CUDA_SMALL_ALLOC_BYTES)
		__sync_fetch_and_add(&p->small_allocs, 1);
	if (b >= CUDA_HIST_BUCKETS)
		b = CUDA_HIST_BUCKETS - 1;
	__sync_fetch_and_add(&p->size_hist[b], 1);
}

/* Records a new allocation so that its free can take it back; returns what the process's live
 * gauge grows by. Only a recorded allocation is added: one that is not (the process is at its cap,
 * or the table is full) is counted as untracked and left out of the gauges, so its free, which
 * finds nothing, leaves them exact instead of inflated for ever. The cap keeps one process from
 * filling the node-wide table and blinding every other's. A pointer still recorded is one whose
 * free went unseen: the new size replaces the old. */
static __always_inline __u64 add_live(struct cuda_proc *p, void *map, __u32 tgid, __u64 ptr, __u64 size)
{
	struct ptr_key k = { .tgid = tgid, .ptr = ptr };
	__u64 *old, grew;

	count_alloc(p, size);
	old = bpf_map_lookup_elem(map, &k);
	if (old) {
		grew = size - *old;
		*old = size;
		return grew;
	}
	if (p->live_entries >= CUDA_LIVE_ENTRIES_PER_PROCESS || insert_counted(map, &k, &size, BPF_NOEXIST)) {
		__sync_fetch_and_add(&p->untracked_allocs, 1);
		return 0;
	}
	__sync_fetch_and_add(&p->live_entries, 1);
	return size;
}

static __always_inline __u64 take_live(struct cuda_proc *p, void *map, __u32 tgid, __u64 ptr)
{
	struct ptr_key k = { .tgid = tgid, .ptr = ptr };
	__u64 *size = bpf_map_lookup_elem(map, &k), v;

	if (!size)
		return 0;
	v = *size;
	if (bpf_map_delete_elem(map, &k) == 0)
		__sync_fetch_and_sub(&p->live_entries, 1);
	return v;
}

/* The stream and graph handles of a call, for the failure context. */
static __always_inline void context_of(__u32 fn, const struct call_args *a, struct cuda_failure *f)
{
	switch (fn) {
	case CUDA_FN_MEM_ALLOC_ASYNC: f->stream = a->arg[2]; f->size = a->arg[1]; break;
	case CUDA_FN_MEM_ALLOC_FROM_POOL: f->stream = a->arg[3]; f->size = a->arg[1]; break;
	case CUDA_FN_MEM_ALLOC:
	case CUDA_FN_MEM_ALLOC_MANAGED:
	case CUDA_FN_MEM_CREATE: f->size = a->arg[1]; break;
	case CUDA_FN_MEM_FREE_ASYNC: f->stream = a->arg[1]; break;
	case CUDA_FN_STREAM_BEGIN_CAPTURE:
	case CUDA_FN_STREAM_END_CAPTURE: f->stream = a->arg[0]; break;
	case CUDA_FN_GRAPH_INSTANTIATE: f->graph = a->arg[1]; break;
	case CUDA_FN_GRAPH_LAUNCH: f->graph = a->arg[0]; f->stream = a->arg[1]; break;
	case CUDA_FN_GRAPH_EXEC_UPDATE: f->graph = a->arg[0]; break;
	}
}

static __always_inline void report_failure(__u32 tgid, __u32 fn, __s32 rc, const struct call_args *a)
{
	static const __u64 zero;
	struct cuda_err_key ek = { .tgid = tgid, .fn = fn, .result = rc };
	struct cuda_failure *f;
	__u64 *n = lookup_or_init(&errors, &ek, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	f = bpf_ringbuf_reserve(&failures, sizeof(*f), 0);
	if (!f) {
		stat_inc(VIGIL_STAT_RINGBUF_DROPS);
		return;
	}
	__builtin_memset(f, 0, sizeof(*f));
	f->ts_ns = bpf_ktime_get_ns();
	f->tgid = tgid;
	f->tid = (__u32)bpf_get_current_pid_tgid();
	f->fn = fn;
	f->result = rc;
	context_of(fn, a, f);
	bpf_get_current_comm(f->comm, sizeof(f->comm));
	bpf_ringbuf_submit(f, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cuda_exit, long ret)
{
	static const struct cuda_proc zero;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, fn = bpf_get_attach_cookie(ctx);
	struct call_key k = { .tid = (__u32)id, .fn = fn };
	struct call_args *a = bpf_map_lookup_elem(&inflight, &k);
	struct cuda_proc *p;
	__s32 rc = (__s32)ret;
	__u64 size;

	if (!a || fn >= CUDA_FN_MAX)
		return 0;
	p = lookup_or_init(&procs, &tgid, &zero);
	if (!p)
		goto out;
	__sync_fetch_and_add(&p->calls[fn & (CUDA_FN_SLOTS - 1)], 1);
	if (!p->comm[0])
		bpf_get_current_comm(p->comm, sizeof(p->comm));
	switch (fn) {
	case CUDA_FN_MEM_ALLOC:
	case CUDA_FN_MEM_ALLOC_ASYNC:
	case CUDA_FN_MEM_ALLOC_FROM_POOL:
	case CUDA_FN_MEM_ALLOC_MANAGED:
	case CUDA_FN_MEM_ALLOC_PITCH:
		if (p->open_captures > 0)
			__sync_fetch_and_add(&p->allocs_in_capture, 1);
		if (rc)
			break;
		/* cuMemAllocPitch: size is *pPitch x Height, known only on return. */
		size = fn == CUDA_FN_MEM_ALLOC_PITCH ? read_user_u64(a->arg[1]) * a->arg[3] : a->arg[1];
		__sync_fetch_and_add(&p->live_bytes, add_live(p, &live, tgid, read_user_u64(a->arg[0]), size));
		break;
	case CUDA_FN_MEM_FREE:
	case CUDA_FN_MEM_FREE_ASYNC:
		/* Only what was seen allocated is taken back (take_live is 0 for older blocks), after
		 * its add (a pointer is freed after cuMemAlloc returned it): no floor needed. */
		if (!rc)
			__sync_fetch_and_sub(&p->live_bytes, take_live(p, &live, tgid, a->arg[0]));
		break;
	case CUDA_FN_MEM_CREATE:
		if (p->open_captures > 0)
			__sync_fetch_and_add(&p->allocs_in_capture, 1);
		if (rc)
			break;
		__sync_fetch_and_add(&p->vmm_physical_bytes, add_live(p, &handles, tgid, read_user_u64(a->arg[0]), a->arg[1]));
		break;
	case CUDA_FN_MEM_RELEASE:
		if (!rc) /* as for live_bytes: only handles seen created */
			__sync_fetch_and_sub(&p->vmm_physical_bytes, take_live(p, &handles, tgid, a->arg[0]));
		break;
	case CUDA_FN_MEM_MAP:
		if (!rc)
			__sync_fetch_and_add(&p->vmm_mapped_bytes, a->arg[1]);
		break;
	case CUDA_FN_MEM_UNMAP:
		if (!rc) /* sized by the call: a mapping older than the agent may be unmapped */
			atomic_sub_floor(&p->vmm_mapped_bytes, a->arg[1]);
		break;
	case CUDA_FN_MEM_ADDRESS_RESERVE:
		if (!rc)
			__sync_fetch_and_add(&p->vmm_reserved_bytes, a->arg[1]);
		break;
	case CUDA_FN_MEM_ADDRESS_FREE:
		if (!rc)
			atomic_sub_floor(&p->vmm_reserved_bytes, a->arg[1]);
		break;
	case CUDA_FN_STREAM_BEGIN_CAPTURE:
		if (!rc)
			__sync_fetch_and_add(&p->open_captures, 1);
		break;
	case CUDA_FN_STREAM_END_CAPTURE:
		/* An invalidated capture still ends; CUDA_ERROR_ILLEGAL_STATE means none was open. */
		if (rc != 401)
			atomic_dec_above_zero(&p->open_captures);
		break;
	}
	if (rc)
		report_failure(tgid, fn, rc, a);
out:
	bpf_map_delete_elem(&inflight, &k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
