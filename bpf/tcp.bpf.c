// SPDX-License-Identifier: GPL-2.0
/* TCP retransmits, resets and RTO per owning process, without kprobes: owners are recorded in
 * process context (connect/listen state changes, accept exits, sendmsg) because retransmits fire
 * in softirq or timer context where current is not the owner. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_tracing.h>
#include "tcp_events.h"
#include "probe_stats.bpf.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6

extern unsigned int CONFIG_HZ __kconfig __weak;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* struct sock * */
	__type(value, struct tcp_owner);
} owners SEC(".maps");

/* tp->total_retrans last seen on sockets with no known owner. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct sock * */
	__type(value, __u32);
} unowned_retrans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tcp_peer_key);
	__type(value, struct tcp_peer_val);
} peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct tcp_timer_state);
} procs SEC(".maps");

/* Entries each process holds in peers (TCP_PEERS_PER_PROCESS); dropped with its peers entries. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} peer_counts SEC(".maps");

/* Every end of a connection with a known owner, keyed by its addresses and ports, so that the
 * correlator can look at both ends of a connection a process uses: a rank that only waits to
 * receive never retransmits, the sender at the other end does. Kept after close (the LRU evicts):
 * a process that fails a collective and exits at once closes its sockets before the agent reads
 * the failure. Each entry is written under its socket's lock (retransmit timer, state change) or
 * once by its owner, so no two writers race on one entry. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, struct tcp_conn_key);
	__type(value, struct tcp_conn_state);
} conns SEC(".maps");

/* The key of the socket's end of its connection; false while it has no peer (listening, or
 * connecting before the kernel picked the source port). */
static __always_inline bool conn_key_of(const struct sock *sk, struct tcp_conn_key *k)
{
	k->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	k->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
	k->dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (k->family == AF_INET6) {
		bpf_core_read(k->saddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_core_read(k->daddr, 16, &sk->__sk_common.skc_v6_daddr);
	} else {
		bpf_core_read(k->saddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_core_read(k->daddr, 4, &sk->__sk_common.skc_daddr);
	}
	return k->sport && k->dport;
}

/* A connection established: a fresh entry (a reused address/port pair starts over), owned by
 * whoever connected; an accepted socket's owner is set when accept() returns it. */
static __always_inline void conn_established(const struct sock *sk)
{
	struct tcp_conn_state c = {};
	struct tcp_conn_key k = {};
	struct tcp_owner *owner;
	__u64 key = (__u64)sk;

	if (!conn_key_of(sk, &k))
		return;
	owner = bpf_map_lookup_elem(&owners, &key);
	if (owner)
		c.tgid = owner->tgid;
	bpf_map_update_elem(&conns, &k, &c, BPF_ANY);
}

/* The entry of the socket's connection end, created empty if new; 0 while it has no peer. */
static __always_inline struct tcp_conn_state *conn_of(const struct sock *sk)
{
	static const struct tcp_conn_state zero;
	struct tcp_conn_key k = {};

	if (!conn_key_of(sk, &k))
		return 0;
	return lookup_or_init(&conns, &k, &zero);
}

/* The owner of a connected socket became known (accept, first send of a socket older than us). */
static __always_inline void conn_owned(const struct sock *sk, __u32 tgid)
{
	struct tcp_conn_state *c = conn_of(sk);

	if (c)
		c->tgid = tgid;
}

static __always_inline void remember_owner(const struct sock *sk)
{
	struct tcp_owner o = {};
	__u64 key = (__u64)sk;

	o.tgid = bpf_get_current_pid_tgid() >> 32;
	o.total_retrans = BPF_CORE_READ((const struct tcp_sock *)sk, total_retrans);
	bpf_get_current_comm(o.comm, sizeof(o.comm));
	bpf_map_update_elem(&owners, &key, &o, BPF_ANY);
	conn_owned(sk, o.tgid);
}

static __always_inline void peer_key_of(const struct sock *sk, __u32 tgid, struct tcp_peer_key *k)
{
	k->tgid = tgid;
	k->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (k->family == AF_INET6)
		bpf_core_read(k->daddr, 16, &sk->__sk_common.skc_v6_daddr);
	else
		bpf_core_read(k->daddr, 4, &sk->__sk_common.skc_daddr);
}

/* The process's counters for peer K, created if new: within its TCP_PEERS_PER_PROCESS entries,
 * or in its one overflow entry (family 0) past them. */
static __always_inline struct tcp_peer_val *peer_entry(struct tcp_peer_key *k)
{
	static const struct tcp_peer_val zero;
	static const __u32 none;
	struct tcp_peer_val *v = bpf_map_lookup_elem(&peers, k);
	__u32 *held;

	if (v)
		return v;
	held = lookup_or_init(&peer_counts, &k->tgid, &none);
	if (held && *held >= TCP_PEERS_PER_PROCESS) {
		k->family = 0;
		__builtin_memset(k->daddr, 0, sizeof(k->daddr));
		return lookup_or_init(&peers, k, &zero);
	}
	if (insert_counted(&peers, k, &zero, BPF_NOEXIST) == 0 && held)
		__sync_fetch_and_add(held, 1);
	return bpf_map_lookup_elem(&peers, k);
}

static __always_inline struct tcp_peer_val *peer_of(const struct sock *sk, struct tcp_owner **owner)
{
	struct tcp_peer_key k = {};
	__u64 key = (__u64)sk;

	struct tcp_peer_val *v;

	*owner = sk ? bpf_map_lookup_elem(&owners, &key) : 0;
	if (sk)
		peer_key_of(sk, *owner ? (*owner)->tgid : 0, &k);
	v = peer_entry(&k);
	if (v && *owner && !v->comm[0])
		__builtin_memcpy(v->comm, (*owner)->comm, sizeof(v->comm));
	return v;
}

/* The connection end's timer state at a retransmit; its run of timeouts as for the process below. */
static __always_inline void conn_retransmit(const struct sock *sk, const struct tcp_owner *owner,
					    const struct tcp_timer_state *now)
{
	struct tcp_conn_state *c = conn_of(sk);

	if (!c)
		return;
	if (owner)
		c->tgid = owner->tgid;
	if (!now->retransmits || !c->run_start_ns)
		c->run_start_ns = now->ts_ns;
	c->timer = *now;
	c->timer.stall_start_ns = now->retransmits ? c->run_start_ns : 0;
}

/* The timer state of the socket at a retransmit attempt, for its connection and its process. RTO
 * and backoff are the values of the timeout that just fired (the kernel doubles them after).
 * icsk_retransmits counts timeouts without progress; at 0 a new run begins, and its start is
 * when the stall began. */
static __always_inline void record_timer_state(const struct sock *sk, struct tcp_owner *owner)
{
	static const struct tcp_timer_state zero;
	const struct inet_connection_sock *icsk = (const void *)sk;
	const struct tcp_sock *tp = (const void *)sk;
	struct tcp_timer_state now = {}, *st;
	__u32 tgid = owner ? owner->tgid : 0;
	__u64 rto = BPF_CORE_READ(icsk, icsk_rto);

	now.rto_us = CONFIG_HZ ? rto * 1000000 / CONFIG_HZ : 0;
	now.backoff = BPF_CORE_READ(icsk, icsk_backoff);
	if (bpf_core_field_exists(icsk->icsk_retransmits))
		now.retransmits = BPF_CORE_READ(icsk, icsk_retransmits);
	now.srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3; /* stored <<3 */
	now.ts_ns = bpf_ktime_get_ns();
	if (owner)
		__builtin_memcpy(now.comm, owner->comm, sizeof(now.comm));
	conn_retransmit(sk, owner, &now);

	st = lookup_or_init(&procs, &tgid, &zero);
	if (!st)
		return;
	*st = now;
	if (owner) {
		if (!now.retransmits || !owner->stall_start_ns)
			owner->stall_start_ns = now.ts_ns;
		if (now.retransmits)
			st->stall_start_ns = owner->stall_start_ns;
	}
}

/* Segments this retransmit added to RetransSegs. Since 6.14 the tracepoint also fires for
 * attempts that failed before the kernel counted them (e.g. -EBUSY while the original is still in
 * the qdisc) and for counted ones whose transmit failed (a netfilter drop: -EPERM), so neither
 * err nor the skb tells; tp->total_retrans moves together with RetransSegs, so its growth since
 * the socket's previous retransmit is the exact count. */
static __always_inline __u32 counted_segs(const struct sock *sk, const struct sk_buff *skb,
					  struct tcp_owner *owner)
{
	__u32 now = BPF_CORE_READ((const struct tcp_sock *)sk, total_retrans), delta;
	__u64 key = (__u64)sk;
	__u32 *last;

	if (owner) {
		delta = now - owner->total_retrans;
		owner->total_retrans = now;
		return delta;
	}
	last = bpf_map_lookup_elem(&unowned_retrans, &key);
	if (last) {
		delta = now - *last;
		*last = now;
		return delta;
	}
	bpf_map_update_elem(&unowned_retrans, &key, &now, BPF_ANY);
	/* First sight of a socket older than the agent: count this skb's segments. */
	const struct tcp_skb_cb *cb = (const void *)skb + bpf_core_field_offset(struct sk_buff, cb);
	__u16 segs = BPF_CORE_READ(cb, tcp_gso_segs);

	return segs ? segs : 1;
}

static __always_inline int on_retransmit(const struct sock *sk, const struct sk_buff *skb)
{
	struct tcp_owner *owner;
	struct tcp_peer_val *v;
	__u32 segs;

	stat_inc(VIGIL_STAT_EVENTS);
	v = peer_of(sk, &owner);
	segs = counted_segs(sk, skb, owner);
	if (v && segs)
		__sync_fetch_and_add(&v->retrans_segs, segs);
	/* Counted or not (a timeout whose retransmit found the original still queued), the attempt
	 * shows the socket's timer state; skipping it would leave a stale stall start behind. */
	record_timer_state(sk, owner);
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(retransmit_btf, const struct sock *sk, const struct sk_buff *skb)
{
	return on_retransmit(sk, skb);
}

/* Fallback for kernels whose BTF lacks the tracepoint's typedef. */
SEC("tracepoint/tcp/tcp_retransmit_skb")
int retransmit_tp(struct trace_event_raw_tcp_retransmit_skb *ctx)
{
	return on_retransmit(BPF_CORE_READ(ctx, skaddr), BPF_CORE_READ(ctx, skbaddr));
}

/* One SYN-ACK retransmitted by a listener for a connection request; the peer is the request's
 * (the listener itself has none), as include/trace/events/tcp.h's tcp_retransmit_synack records
 * it: family from the listener, address from the inet_request_sock's ir_rmt_addr/ir_v6_rmt_addr
 * (its sock_common's skc_daddr/skc_v6_daddr). */
static __always_inline int on_synack_retransmit(const struct sock *listener, __u16 family, const void *daddr)
{
	__u64 key = (__u64)listener;
	struct tcp_owner *owner = bpf_map_lookup_elem(&owners, &key);
	struct tcp_peer_key k = {};
	struct tcp_peer_val *v;

	stat_inc(VIGIL_STAT_EVENTS);
	k.tgid = owner ? owner->tgid : 0;
	k.family = family;
	bpf_probe_read_kernel(k.daddr, family == AF_INET6 ? 16 : 4, daddr);
	v = peer_entry(&k);
	if (v) {
		__sync_fetch_and_add(&v->retrans_segs, 1);
		__sync_fetch_and_add(&v->synack_retrans, 1);
	}
	return 0;
}

/* The tp_btf form runs whenever the event fires. The classic tracepoint below is skipped (and
 * counted as a recursion miss) while any kprobe or classic tracepoint program runs on the CPU, or
 * while the kernel copies a map for a bpf(2) caller there (bpf_prog_active): a SYN-ACK timer
 * firing during a scrape was a lost count. */
SEC("tp_btf/tcp_retransmit_synack")
int BPF_PROG(synack_btf, const struct sock *sk, const struct request_sock *req)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	if (family == AF_INET6)
		return on_synack_retransmit(sk, family, &req->__req_common.skc_v6_daddr);
	return on_synack_retransmit(sk, family, &req->__req_common.skc_daddr);
}

/* Fallback for kernels whose BTF lacks the tracepoint's typedef. */
SEC("tracepoint/tcp/tcp_retransmit_synack")
int synack_tp(struct trace_event_raw_tcp_retransmit_synack *ctx)
{
	__u16 family = BPF_CORE_READ(ctx, family);

	if (family == AF_INET6)
		return on_synack_retransmit(BPF_CORE_READ(ctx, skaddr), family, &ctx->daddr_v6);
	return on_synack_retransmit(BPF_CORE_READ(ctx, skaddr), family, &ctx->daddr);
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(send_reset, const struct sock *sk)
{
	struct tcp_owner *owner;
	struct tcp_peer_val *v;

	stat_inc(VIGIL_STAT_EVENTS);
	v = peer_of(sk, &owner);
	if (v)
		__sync_fetch_and_add(&v->resets_sent, 1);
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(receive_reset, const struct sock *sk)
{
	struct tcp_owner *owner;
	struct tcp_peer_val *v;

	stat_inc(VIGIL_STAT_EVENTS);
	v = peer_of(sk, &owner);
	if (v)
		__sync_fetch_and_add(&v->resets_received, 1);
	return 0;
}

/* Segments that a closing socket's retransmit events left uncounted (read with bpftool when a
 * count falls short of the kernel's). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} retrans_settled SEC(".maps");

/* tp->total_retrans is final at close: what grew past the last count of the socket (its owner's or
 * its unowned record) is a retransmit the kernel counted and no event of ours did, and without
 * this it would be lost with the socket: the next retransmit that would have carried it never
 * comes. A socket we never saw retransmit has nothing to settle. */
static __always_inline void settle_at_close(const struct sock *sk)
{
	__u32 now = BPF_CORE_READ((const struct tcp_sock *)sk, total_retrans), delta = 0, idx = 0;
	__u64 key = (__u64)sk, *settled;
	struct tcp_owner *owner;
	struct tcp_peer_val *v;
	__u32 *last;

	owner = bpf_map_lookup_elem(&owners, &key);
	if (owner) {
		delta = now - owner->total_retrans;
		owner->total_retrans = now;
	} else if ((last = bpf_map_lookup_elem(&unowned_retrans, &key))) {
		delta = now - *last;
	}
	/* The record outlives the socket otherwise, and a new socket at the same address would
	 * take its count as its own baseline. */
	bpf_map_delete_elem(&unowned_retrans, &key);
	if (!delta || delta > (1u << 30))
		return;
	v = peer_of(sk, &owner); /* only now: a peer entry for every closing socket would fill peers */
	if (!v)
		return;
	__sync_fetch_and_add(&v->retrans_segs, delta);
	settled = bpf_map_lookup_elem(&retrans_settled, &idx);
	if (settled)
		*settled += delta; /* vigil: per-cpu map retrans_settled */
}

/* connect() and listen() move the socket in the owner's own context; a closed socket is settled
 * and forgotten (its connection's entry stays: see conns). */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(set_state, const struct sock *sk, int oldstate, int newstate)
{
	__u64 key = (__u64)sk;

	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	if (newstate == TCP_SYN_SENT || newstate == TCP_LISTEN)
		remember_owner(sk);
	else if (newstate == TCP_ESTABLISHED)
		conn_established(sk);
	else if (newstate == TCP_CLOSE) {
		settle_at_close(sk);
		bpf_map_delete_elem(&owners, &key);
	}
	return 0;
}

/* sendmsg runs in the sender's context: covers sockets older than the agent and passed fds. */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(sendmsg_locked, const struct sock *sk)
{
	__u64 key = (__u64)sk;

	if (!bpf_map_lookup_elem(&owners, &key))
		remember_owner(sk);
	return 0;
}

/* An accepted socket is born in softirq; its owner is whoever accept() returns it to. */
static __always_inline int on_accept_exit(long fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct file **fds;
	struct file *file;
	struct socket *sock;
	struct sock *sk;

	if (fd < 0)
		return 0;
	fds = BPF_CORE_READ(task, files, fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return 0;
	sock = BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (sk)
		remember_owner(sk);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int accept4_exit(struct trace_event_raw_sys_exit *ctx)
{
	return on_accept_exit(ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_accept")
int accept_exit(struct trace_event_raw_sys_exit *ctx)
{
	return on_accept_exit(ctx->ret);
}

char LICENSE[] SEC("license") = "GPL";
