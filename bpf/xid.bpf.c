// SPDX-License-Identifier: GPL-2.0
/* NVIDIA XID errors from the open kernel module's only tracepoint, nvidia:nvidia_dev_xid
 * (__string dev, u32 error_code, __string msg). The module's types are not in vmlinux BTF, so the
 * field offsets come from the tracepoint's format file, read by the agent, as rodata. Every event
 * goes to user space, which counts it once with its kernel log line (agent/probes/xid_ledger.h). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "xid_events.h"
#include "probe_stats.bpf.h"

const volatile __u32 dev_loc_off = 8;   /* __data_loc char[] dev */
const volatile __u32 code_off = 12;     /* u32 error_code */
const volatile __u32 msg_loc_off = 16;  /* __data_loc char[] msg */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

/* A __data_loc field holds (length << 16 | offset from the record's start). */
static __always_inline void read_data_loc(void *ctx, __u32 off, char *dst, __u32 size)
{
	__u32 loc = 0;

	if (bpf_probe_read_kernel(&loc, sizeof(loc), ctx + off))
		return;
	bpf_probe_read_kernel_str(dst, size, ctx + (loc & 0xffff));
}

SEC("tracepoint")
int nvidia_dev_xid(void *ctx)
{
	struct xid_event *e;

	stat_inc(VIGIL_STAT_EVENTS);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		/* the log line of this XID then counts alone (xid_ledger.h) */
		stat_inc(VIGIL_STAT_RINGBUF_DROPS);
		return 0;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->code = 0;
	bpf_probe_read_kernel(&e->code, sizeof(e->code), ctx + code_off);
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->dev[0] = 0;
	read_data_loc(ctx, dev_loc_off, e->dev, sizeof(e->dev));
	e->msg[0] = 0;
	read_data_loc(ctx, msg_loc_off, e->msg, sizeof(e->msg));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
