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
