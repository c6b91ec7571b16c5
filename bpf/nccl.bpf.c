// SPDX-License-Identifier: GPL-2.0
/* NCCL in libnccl.so.2: communicator init/abort/destroy, collectives and point-to-point (op,
 * bytes, result at enqueue) and async errors. One entry and one return program serve every entry
 * point; the uprobe's cookie says which. Failures go to a ring buffer. Each communicator a
 * process initialises is kept with its ncclUniqueId, rank and nranks, and each collective entered
 * on it counted: the same id on every rank is what joins the ranks of one communicator
 * (docs/correlation.md). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "nccl_events.h"
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

/* The communicators of each process (at most NCCL_COMMS_PER_PROCESS each): 64 NCCL processes
 * at the cap, far more than a node's GPUs; ~170 bytes an entry, preallocated. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct nccl_comm_key);
	__type(value, struct nccl_comm_val);
} comms SEC(".maps");

/* An init's unique id, rank and nranks, read at its entry (the id is gone from the stack at its
 * return), per thread until the return; LRU so an init that never returns does not leak. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct nccl_comm_val);
} init_args SEC(".maps");

/* Arguments beyond the five registers libbpf 1.1 names, and the by-value ncclUniqueId, from the
 * ABI (nccl.h: ncclCommInitRank(comm, nranks, ncclUniqueId commId, rank), config 5th in
 * ncclCommInitRankConfig). x86-64 SysV: a 128-byte struct is passed in memory, on the stack
 * above the return address, and takes no register: rank is the 3rd integer register (rdx); the
 * 6th integer argument is r9, the 7th on the stack above the return address. AArch64 AAPCS64: a
 * composite over 16 bytes is copied by the caller and its address passed in the next register
 * (x2), so rank is x3; x5 and x6 are the 6th and 7th. */
#if defined(bpf_target_x86)
#define NCCL_ARG6(ctx) ((ctx)->r9)
static __always_inline int read_id(struct pt_regs *ctx, struct nccl_comm_val *v)
{
	v->rank = (__s32)PT_REGS_PARM3(ctx);
	return bpf_probe_read_user(v->id, sizeof(v->id), (const void *)(PT_REGS_SP(ctx) + 8));
}
static __always_inline __u64 arg7(struct pt_regs *ctx)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)(PT_REGS_SP(ctx) + 8));
	return v;
}
#elif defined(bpf_target_arm64)
#define NCCL_ARG6(ctx) (__PT_REGS_CAST(ctx)->regs[5])
static __always_inline int read_id(struct pt_regs *ctx, struct nccl_comm_val *v)
{
	v->rank = (__s32)PT_REGS_PARM4(ctx);
	return bpf_probe_read_user(v->id, sizeof(v->id), (const void *)PT_REGS_PARM3(ctx));
}
static __always_inline __u64 arg7(struct pt_regs *ctx)
{
	return __PT_REGS_CAST(ctx)->regs[6];
}
#else
#error "nccl.bpf.c: the argument layout of this architecture is not written down"
#endif

/* The communicator a collective is called on (nccl.h), 1-based: ncclAllReduce(sendbuff,
 * recvbuff, count, datatype, op, comm, stream) 6th; ncclAllGather(sendbuff, recvbuff,
 * sendcount, datatype, comm, stream) 5th; ncclReduceScatter(..., recvcount, datatype, op, comm,
 * stream) 6th; ncclBroadcast(..., count, datatype, root, comm, stream) 6th; ncclReduce(...,
 * count, datatype, op, root, comm, stream) 7th. Send/Recv are not progress: pipeline stages
 * call them unequally. */
static __always_inline __u64 collective_comm(struct pt_regs *ctx, __u32 fn)
{
	switch (fn) {
	case NCCL_FN_ALL_GATHER:
		return PT_REGS_PARM5(ctx);
	case NCCL_FN_ALL_REDUCE:
	case NCCL_FN_REDUCE_SCATTER:
	case NCCL_FN_BROADCAST:
		return NCCL_ARG6(ctx);
	case NCCL_FN_REDUCE:
		return arg7(ctx);
	default:
		return 0;
	}
}

SEC("uprobe")
int BPF_KPROBE(nccl_enter)
{
	__u32 fn = bpf_get_attach_cookie(ctx);
	struct call_key ik = { .tid = (__u32)bpf_get_current_pid_tgid(), .fn = fn };
	__u64 handle;

	if (fn == NCCL_FN_COMM_INIT_RANK || fn == NCCL_FN_COMM_INIT_RANK_CONFIG) {
		struct nccl_comm_val v = { .nranks = (__s32)PT_REGS_PARM2(ctx) };
		__u32 tid = (__u32)bpf_get_current_pid_tgid();

		if (!read_id(ctx, &v))
			bpf_map_update_elem(&init_args, &tid, &v, BPF_ANY);
	}
	handle = collective_comm(ctx, fn);
	/* Until a restarted agent releases the previous agent's pinned links, two entry programs run
	 * on each call, sharing the pinned inflight: the first saves the call, the second finds it
	 * saved and does not count the collective again (a thread is in one call of a function at a
	 * time; its return deletes the entry). */
	if (handle && !bpf_map_lookup_elem(&inflight, &ik)) {
		struct nccl_comm_key k = { .tgid = bpf_get_current_pid_tgid() >> 32, .handle = handle };
		struct nccl_comm_val *c = bpf_map_lookup_elem(&comms, &k);

		if (c) {
			__sync_fetch_and_add(&c->collectives, 1);
			c->last_enter_ns = bpf_ktime_get_ns();
		}
	}
	return save_call(ctx);
}

/* Keeps the communicator an init returned in *newcomm, within the process's share of the table. */
static __always_inline void track_comm(__u32 tgid, struct nccl_proc *p, const struct call_args *a)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct nccl_comm_val *v = bpf_map_lookup_elem(&init_args, &tid);
	struct nccl_comm_key k = { .tgid = tgid };

	if (!v || bpf_probe_read_user(&k.handle, sizeof(k.handle), (const void *)a->arg[0]) || !k.handle)
		return;
	if (!bpf_map_update_elem(&comms, &k, v, BPF_EXIST)) /* a handle reused: destroy not seen */
		return;
	if (__sync_fetch_and_add(&p->tracked_comms, 1) >= NCCL_COMMS_PER_PROCESS) {
		__sync_fetch_and_add(&p->tracked_comms, -1);
		__sync_fetch_and_add(&p->comms_refused, 1);
		stat_inc(VIGIL_STAT_TABLE_FULL);
		return;
	}
	if (insert_counted(&comms, &k, v, BPF_NOEXIST)) {
		__sync_fetch_and_add(&p->tracked_comms, -1);
		__sync_fetch_and_add(&p->comms_refused, 1);
	}
}

static __always_inline void untrack_comm(__u32 tgid, struct nccl_proc *p, __u64 handle)
{
	struct nccl_comm_key k = { .tgid = tgid, .handle = handle };

	if (!bpf_map_delete_elem(&comms, &k))
		atomic_dec_above_zero(&p->tracked_comms);
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
		/* ncclInProgress: a non-blocking init has returned the communicator, still connecting */
		if (!ret || ret == NCCL_IN_PROGRESS)
			track_comm(tgid, p, a);
		bpf_map_delete_elem(&init_args, &k.tid);
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
		untrack_comm(tgid, p, comm_handle);
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
