// SPDX-License-Identifier: GPL-2.0
/* The worker's tensor-parallel collectives through its USDT probes vigil:collective_begin(op,
 * bytes, timeout_ms, group_id, seq, rank, nranks) and vigil:collective_end(op, bytes, status,
 * elapsed_ns) (docs/probes.md): counters, the open collective and the group's progress per process
 * in a map, every failure (timeout, error) to user space, where the correlator checks it against
 * the process's TCP retransmits. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
/* libbpf's pool of USDT argument specs for this object (256 by default): every attached site may
 * take one until its link is destroyed; the agent keeps its attachments within it (FileLinks). */
#define BPF_USDT_MAX_SPEC_CNT 1024
#include <bpf/usdt.bpf.h>
#include "collective_events.h"
#include "probe_stats.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct collective_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct collective_group);
} groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} failures SEC(".maps");

static __always_inline struct collective_proc *proc_of(__u32 *tgid)
{
	static const struct collective_proc zero;
	struct collective_proc *p;

	stat_inc(VIGIL_STAT_EVENTS);
	*tgid = bpf_get_current_pid_tgid() >> 32;
	p = lookup_or_init(&procs, tgid, &zero);
	if (p && !p->comm[0])
		bpf_get_current_comm(p->comm, sizeof(p->comm));
	return p;
}

SEC("usdt")
int BPF_USDT(collective_begin, __u32 op, __u64 bytes, __u64 timeout_ms, __u64 group_id, __u64 seq, __u32 rank,
	     __u32 nranks)
{
	__u32 tgid;
	struct collective_proc *p = proc_of(&tgid);
	struct collective_group g;
	__u64 now = bpf_ktime_get_ns();

	if (!p)
		return 0;
	p->timeout_ms = timeout_ms;
	p->inflight_op = op;
	p->inflight_since_ns = now;
	if (!group_id) /* the broadcast that agrees on the id, or a worker without these arguments */
		return 0;
	g.group_id = group_id;
	g.seq = seq;
	g.last_begin_ns = now;
	g.rank = rank;
	g.nranks = nranks;
	insert_counted(&groups, &tgid, &g, BPF_ANY);
	return 0;
}

SEC("usdt")
int BPF_USDT(collective_end, __u32 op, __u64 bytes, __u32 status, __u64 elapsed_ns)
{
	__u32 tgid;
	struct collective_proc *p = proc_of(&tgid);
	struct collective_failure *e;

	if (!p)
		return 0;
	__sync_fetch_and_add(&p->calls, 1);
	p->inflight_since_ns = 0;
	if (!status)
		return 0;
	__sync_fetch_and_add(&p->failures, 1);
	if (status == 1)
		__sync_fetch_and_add(&p->timeouts, 1);
	e = bpf_ringbuf_reserve(&failures, sizeof(*e), 0);
	if (!e) {
		stat_inc(VIGIL_STAT_RINGBUF_DROPS);
		return 0;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->elapsed_ns = elapsed_ns;
	e->bytes = bytes;
	e->timeout_ms = p->timeout_ms;
	e->tgid = tgid;
	e->op = op;
	e->status = status;
	e->pad = 0;
	__builtin_memcpy(e->comm, p->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
