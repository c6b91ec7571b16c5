// SPDX-License-Identifier: GPL-2.0
/* Process lifecycle: exec (a new program may map libcuda/libnccl: re-scan it) and exit of a
 * whole process (drop its state after the grace period). Rare events: a ring buffer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "proc.h"
#include "probe_stats.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

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
	/* Only the thread group leader's exit ends the process. */
	if (BPF_CORE_READ(p, pid) == BPF_CORE_READ(p, tgid))
		emit(BPF_CORE_READ(p, tgid), PROC_EXIT);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
