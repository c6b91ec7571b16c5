// SPDX-License-Identifier: GPL-2.0
/* NCCL in libnccl.so.2: communicator init/abort/destroy, collectives and point-to-point (op,
 * bytes, result at enqueue) and async errors. One entry and one return program serve every entry
 * point; the uprobe's cookie says which. Failures go to a ring buffer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "nccl.h"
#include "probe_stats.bpf.h"
#include "atomic.bpf.h"
#include "uprobe_calls.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct nccl_call_key);
	__type(value, struct nccl_call_val);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct nccl_async_key);
	__type(value, __u64);
} async_errors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct nccl_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} failures SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(nccl_enter)
{
	return save_call(ctx);
}

/* ncclDataType_t sizes: int8/uint8 1, int32/uint32 4, int64/uint64 8, fp16 2, fp32 4, fp64 8,
 * bf16 2, fp8 (e4m3, e5m2) 1. */
static __always_inline __u64 dtype_size(__u64 t)
{
	switch (t) {
	case 0: case 1: case 10: case 11: return 1;
	case 6: case 9: return 2;
	case 2: case 3: case 7: return 4;
	case 4: case 5: case 8: return 8;
	default: return 0;
	}
}

/* Bytes handed over: count x datatype size. ncclSend/Recv take (buf, count, type, ...), the
 * collectives (send, recv, count, type, ...). */
static __always_inline __u64 bytes_of(__u32 fn, const struct call_args *a)
{
	switch (fn) {
	case NCCL_FN_ALL_REDUCE:
	case NCCL_FN_ALL_GATHER:
	case NCCL_FN_REDUCE_SCATTER:
	case NCCL_FN_BROADCAST:
	case NCCL_FN_REDUCE:
		return a->arg[2] * dtype_size(a->arg[3]);
	case NCCL_FN_SEND:
	case NCCL_FN_RECV:
		return a->arg[1] * dtype_size(a->arg[2]);
	default:
		return 0;
	}
}

static __always_inline void send_failure(__u32 tgid, __u32 fn, __s32 rc, const struct call_args *a,
					 __u64 comm_handle)
{
	struct nccl_failure *f = bpf_ringbuf_reserve(&failures, sizeof(*f), 0);

	if (!f) {
		stat_inc(VIGIL_STAT_RINGBUF_DROPS);
		return;
	}
	__builtin_memset(f, 0, sizeof(*f));
	f->ts_ns = bpf_ktime_get_ns();
	f->tgid = tgid;
	f->fn = fn;
	f->result = rc;
	f->comm_handle = comm_handle;
	if (fn == NCCL_FN_COMM_INIT_RANK || fn == NCCL_FN_COMM_INIT_RANK_CONFIG) {
		/* ncclUniqueId (128 bytes) is passed on the stack: rank is the third integer argument. */
		f->nranks = (__s32)a->arg[1];
		f->rank = (__s32)a->arg[2];
	}
	bpf_get_current_comm(f->comm, sizeof(f->comm));
	bpf_ringbuf_submit(f, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(nccl_exit, long ret)
{
	static const struct nccl_call_val zero_val;
	static const struct nccl_proc zero_proc;
	static const __u64 zero;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, fn = bpf_get_attach_cookie(ctx);
	struct call_key k = { .tid = (__u32)id, .fn = fn };
	struct call_args *a = bpf_map_lookup_elem(&inflight, &k);
	struct nccl_call_key ck = { .tgid = tgid, .fn = fn, .result = (__s32)ret };
	struct nccl_call_val *v;
	struct nccl_proc *p;
	__u64 comm_handle = 0;

	if (!a || fn >= NCCL_FN_MAX)
		return 0;
	v = lookup_or_init(&calls, &ck, &zero_val);
	if (v) {
		__sync_fetch_and_add(&v->calls, 1);
		if (!ret)
			__sync_fetch_and_add(&v->bytes, bytes_of(fn, a));
	}
	p = lookup_or_init(&procs, &tgid, &zero_proc);
	if (!p)
		goto out;
	if (!p->comm[0])
		bpf_get_current_comm(p->comm, sizeof(p->comm));
	switch (fn) {
	case NCCL_FN_COMM_INIT_RANK:
	case NCCL_FN_COMM_INIT_RANK_CONFIG:
		if (!ret) {
			__sync_fetch_and_add(&p->communicators, 1);
			p->last_nranks = (__s32)a->arg[1];
			p->last_rank = (__s32)a->arg[2];
		}
		break;
	case NCCL_FN_COMM_INIT_ALL:
		if (!ret)
			__sync_fetch_and_add(&p->communicators, (__s32)a->arg[1]); /* one per device */
		break;
	case NCCL_FN_COMM_ABORT:
		__sync_fetch_and_add(&p->aborts, 1);
		/* fall through: an aborted communicator is gone too */
	case NCCL_FN_COMM_DESTROY:
		if (!ret) /* one created before the agent attached may be destroyed */
			atomic_dec_above_zero(&p->communicators);
		comm_handle = a->arg[0];
		break;
	case NCCL_FN_COMM_GET_ASYNC_ERROR: {
		__s32 async_err = 0;

		comm_handle = a->arg[0];
		if (ret || bpf_probe_read_user(&async_err, sizeof(async_err), (const void *)a->arg[1]))
			break;
		if (async_err) {
			struct nccl_async_key ak = { .tgid = tgid, .error = async_err };
			__u64 *n = lookup_or_init(&async_errors, &ak, &zero);

			if (n)
				__sync_fetch_and_add(n, 1);
			send_failure(tgid, fn, async_err, a, comm_handle);
		}
		break;
	}
	}
	if (ret)
		send_failure(tgid, fn, (__s32)ret, a, comm_handle);
out:
	bpf_map_delete_elem(&inflight, &k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
