/* Types shared by nccl.bpf.c and the agent: NCCL calls, bytes and communicator lifecycle. */
#pragma once

/* Which NCCL entry point a probe is on; passed as the uprobe's BPF cookie. */
enum nccl_fn {
	NCCL_FN_GET_UNIQUE_ID = 0,
	NCCL_FN_COMM_INIT_RANK,
	NCCL_FN_COMM_INIT_RANK_CONFIG,
	NCCL_FN_COMM_INIT_ALL,
	NCCL_FN_ALL_REDUCE,
	NCCL_FN_ALL_GATHER,
	NCCL_FN_REDUCE_SCATTER,
	NCCL_FN_BROADCAST,
	NCCL_FN_REDUCE,
	NCCL_FN_SEND,
	NCCL_FN_RECV,
	NCCL_FN_COMM_GET_ASYNC_ERROR,
	NCCL_FN_COMM_ABORT,
	NCCL_FN_COMM_DESTROY,
	NCCL_FN_MAX,
};

/* ncclResult_t ncclInProgress: a non-blocking call still under way. */
#define NCCL_IN_PROGRESS 7

/* Counters per (process, function, result). Collectives return at enqueue, not completion:
 * bytes are what was handed to NCCL. */
struct nccl_call_key {
	__u32 tgid;
	__u32 fn;
	__s32 result;
	__u32 pad;
};

struct nccl_call_val {
	__u64 calls;
	__u64 bytes;
};

/* Errors ncclCommGetAsyncError reported through its out-parameter, per (process, error). */
struct nccl_async_key {
	__u32 tgid;
	__s32 error;
};

struct nccl_proc {
	__s64 communicators; /* initialised and not yet destroyed or aborted */
	__u64 aborts;
	__s32 last_nranks;
	__s32 last_rank;
	char comm[16];
	__s64 tracked_comms; /* entries of this process in `comms` */
	__u64 comms_refused; /* communicators not tracked: the process had NCCL_COMMS_PER_PROCESS */
};

/* NCCL_UNIQUE_ID_BYTES in nccl.h: what every rank of a communicator passes to its init. */
#define NCCL_UNIQUE_ID_BYTES 128
/* A process may create communicators without bound; the table holds this many of each. */
#define NCCL_COMMS_PER_PROCESS 64

/* A communicator of a process, by the ncclComm_t its init returned. */
struct nccl_comm_key {
	__u32 tgid;
	__u32 pad;
	__u64 handle;
};

/* What identifies the communicator across ranks (the unique id, hashed by the agent), this
 * process's rank in it, and its progress: collectives entered, the latest one's start. */
struct nccl_comm_val {
	__u64 collectives;
	__u64 last_enter_ns; /* bpf_ktime_get_ns at the latest collective's entry; 0: none yet */
	__s32 rank;
	__s32 nranks;
	unsigned char id[NCCL_UNIQUE_ID_BYTES];
};

/* Sent for every failed call and every async error. */
struct nccl_failure {
	__u64 ts_ns;
	__u32 tgid;
	__u32 fn;
	__s32 result;
	__s32 nranks;
	__s32 rank;
	__u32 pad;
	__u64 comm_handle;
	char comm[16];
};
