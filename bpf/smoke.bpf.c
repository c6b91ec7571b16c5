// SPDX-License-Identifier: GPL-2.0
/* Toolchain self-test: reports getppid() calls of one process through a ring buffer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "smoke_events.h"

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int handle_getppid(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct smoke_event *e;

	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->ts_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
