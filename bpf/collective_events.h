/* Types shared by collective.bpf.c and the agent's correlator: the worker's collective probes. */
#pragma once

/* Per process: its collectives and the one in flight (the worker runs one at a time). */
struct collective_proc {
	__u64 calls;
	__u64 failures;
	__u64 timeouts;
	__u64 timeout_ms;        /* of the latest collective_begin: the process's configured timeout */
	__u64 inflight_since_ns; /* bpf_ktime_get_ns of the open collective_begin; 0: none open */
	__u32 inflight_op;
	__u32 pad;
	char comm[16];
};

/* Per process in a tensor-parallel group: its place there as the latest collective_begin gave it
 * (a worker is in one group at a time). Its own map, not fields of collective_proc: the pinned
 * `procs` of an older agent keeps its layout, so an upgrade reuses it. */
struct collective_group {
	__u64 group_id;       /* the group's id, the same on every rank (never 0 here) */
	__u64 seq;            /* the latest collective_begin's sequence number in the group */
	__u64 last_begin_ns;  /* bpf_ktime_get_ns of the latest collective_begin */
	__u32 rank;
	__u32 nranks;
};

/* Sent for every collective_end with a non-zero status. */
struct collective_failure {
	__u64 ts_ns; /* bpf_ktime_get_ns at collective_end */
	__u64 elapsed_ns;
	__u64 bytes;
	__u64 timeout_ms;
	__u32 tgid;
	__u32 op;
	__u32 status; /* 1 timeout, 2 error (docs/probes.md) */
	__u32 pad;
	char comm[16];
};
