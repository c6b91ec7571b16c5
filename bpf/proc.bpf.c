// SPDX-License-Identifier: GPL-2.0
/* Process lifecycle: exec (a new program may map libcuda/libnccl: re-scan it) and exit of a
 * whole process the agent holds state for (drop its state after the grace period).
 * Every exec is sent (the kernel cannot know yet whether the new program will map libcuda);
 * exits only of the processes in `tracked`, which user space fills with the pids its process
 * table holds: in an exec storm (a build: every compiler is an exec and an exit) that halves the
 * events, and the exits of processes the agent never looked at were of no use to it. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "proc_events.h"
#include "probe_stats.bpf.h"

/* 16-byte records (8-byte header + event): 65536 events, several seconds of the fastest exec
 * storm measured (docs/probes-agent.md), drained by a dedicated thread in user space. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");

/* tgid -> 1 for each process in the agent's process table (user space adds and removes; the exit
 * below removes too). Full: that process's exit is not sent, and its end is noticed when its
 * /proc entry goes, as for processes that exited before the agent started. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tracked SEC(".maps");

static __always_inline void emit(__u32 tgid, __u32 kind)
{
	struct vigil_proc_event *e;

	stat_inc(VIGIL_STAT_EVENTS);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_inc(VIGIL_STAT_RINGBUF_DROPS); /* the periodic full scan still finds it */
		return;
	}
	e->tgid = tgid;
	e->kind = kind;
	bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(process_exec, struct task_struct *p)
{
	emit(BPF_CORE_READ(p, tgid), PROC_EXEC);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(process_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	/* Only the thread group leader's exit ends the process. */
	if (BPF_CORE_READ(p, pid) != tgid)
		return 0;
	if (!bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	bpf_map_delete_elem(&tracked, &tgid);
	emit(tgid, PROC_EXIT);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
