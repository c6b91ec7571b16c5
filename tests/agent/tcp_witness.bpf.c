// SPDX-License-Identifier: GPL-2.0
/* A second witness of the TCP retransmit tracepoints, independent of the agent's programs
 * (pylib/vigil_harness/tcp_witness.py loads it): each of the three ways a BPF program hooks a
 * tracepoint (tp_btf and raw_tp through the tracepoint's bpf_trace_run probe, a classic
 * tracepoint program through the trace event's perf probe) counts per CPU and logs every run
 * (time, CPU, socket), so that an event the kernel fired (tracefs has it) and the agent's program
 * did not run for can be told apart: lost by every BPF program on the tracepoint, or by ours.
 * A TCP socket's move to TCP_CLOSE is logged the same way (the agent settles a socket's
 * uncounted retransmits there: settle_at_close in bpf/tcp.bpf.c), so that a close the kernel
 * ran no program for is told from one it did. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

enum witness_prog {
	SKB_BTF, SKB_RAW, SKB_TP,
	SYNACK_BTF, SYNACK_RAW, SYNACK_TP,
	CLOSE_BTF,
	WITNESS_PROGS,
};

#define LOG_PER_CPU 16384

struct seen {
	__u64 ts_ns; /* bpf_ktime_get_ns: CLOCK_MONOTONIC, tracefs' "mono" clock */
	__u64 sk;
	__u32 prog;
	__u32 cpu;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WITNESS_PROGS);
	__type(key, __u32);
	__type(value, __u64);
} runs SEC(".maps");

/* Slots taken in each CPU's part of the log (wraps at LOG_PER_CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} next_slot SEC(".maps");

/* LOG_PER_CPU entries per CPU; the loader sizes it to the machine's CPUs before loading. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LOG_PER_CPU);
	__type(key, __u32);
	__type(value, struct seen);
} run_log SEC(".maps");

static __always_inline int note(__u32 prog, const void *sk)
{
	struct seen s = {};
	__u32 zero = 0, key;
	__u64 *n, *slot;

	n = bpf_map_lookup_elem(&runs, &prog);
	if (n)
		__sync_fetch_and_add(n, 1); /* a softirq may interrupt this CPU's process-context run */
	slot = bpf_map_lookup_elem(&next_slot, &zero);
	if (!slot)
		return 0;
	s.ts_ns = bpf_ktime_get_ns();
	s.sk = (__u64)sk;
	s.prog = prog;
	s.cpu = bpf_get_smp_processor_id();
	key = s.cpu * LOG_PER_CPU + (__sync_fetch_and_add(slot, 1) % LOG_PER_CPU);
	bpf_map_update_elem(&run_log, &key, &s, BPF_ANY);
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(w_skb_btf, const struct sock *sk)
{
	return note(SKB_BTF, sk);
}

SEC("raw_tp/tcp_retransmit_skb")
int BPF_PROG(w_skb_raw, const struct sock *sk)
{
	return note(SKB_RAW, sk);
}

SEC("tracepoint/tcp/tcp_retransmit_skb")
int w_skb_tp(struct trace_event_raw_tcp_retransmit_skb *ctx)
{
	return note(SKB_TP, BPF_CORE_READ(ctx, skaddr));
}

SEC("tp_btf/tcp_retransmit_synack")
int BPF_PROG(w_synack_btf, const struct sock *sk)
{
	return note(SYNACK_BTF, sk);
}

SEC("raw_tp/tcp_retransmit_synack")
int BPF_PROG(w_synack_raw, const struct sock *sk)
{
	return note(SYNACK_RAW, sk);
}

SEC("tracepoint/tcp/tcp_retransmit_synack")
int w_synack_tp(struct trace_event_raw_tcp_retransmit_synack *ctx)
{
	return note(SYNACK_TP, BPF_CORE_READ(ctx, skaddr));
}

#define IPPROTO_TCP 6

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(w_close_btf, const struct sock *sk, int oldstate, int newstate)
{
	if (newstate != TCP_CLOSE || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	return note(CLOSE_BTF, sk);
}

char LICENSE[] SEC("license") = "GPL";
