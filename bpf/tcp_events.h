/* Types shared by tcp.bpf.c and the agent's TCP collector: retransmits, resets, RTO per owner. */
#pragma once

#define VIGIL_COMM_LEN 16
/* Peer entries one process (or the unattributed, pid 0) may hold in the node's peers table
 * (16,384): past it, its further peers share one entry of family 0 (exported as peer="other"),
 * so a process reset by thousands of addresses cannot take every other's room. */
#define TCP_PEERS_PER_PROCESS 1024

/* Owner of a socket, recorded in process context (connect, listen, accept, sendmsg). */
struct tcp_owner {
	__u32 tgid;
	__u32 total_retrans; /* tp->total_retrans already counted for this socket */
	char comm[VIGIL_COMM_LEN];
	__u64 stall_start_ns; /* first retransmit of the current run of timeouts */
};

/* Counters per (process, peer address); tgid 0 means "socket with no known owner". */
struct tcp_peer_key {
	__u32 tgid;
	__u16 family; /* AF_INET or AF_INET6 */
	__u16 pad;
	__u8 daddr[16]; /* IPv4 in the first 4 bytes */
};

struct tcp_peer_val {
	__u64 retrans_segs;   /* segments, as the kernel's RetransSegs counts them */
	__u64 synack_retrans; /* SYN-ACK retransmits (also in RetransSegs) */
	__u64 resets_sent;
	__u64 resets_received;
	char comm[16];        /* the owner's, when the entry was made: outlives the process (a refused
	                       * client is gone before /proc is read) */
};

/* Timer state of a socket at its latest retransmit (per process: its latest retransmitting socket). */
struct tcp_timer_state {
	__u64 rto_us;
	__u64 srtt_us;
	__u32 backoff;
	__u32 retransmits;
	__u64 ts_ns;          /* of the latest retransmit attempt (bpf_ktime_get_ns) */
	__u64 stall_start_ns; /* its socket's first retransmit without progress since; 0: none */
	char comm[VIGIL_COMM_LEN];
};

/* One end of a TCP connection: its own address and port, then the other end's (ports in host
 * order). The other end's key is this one with the two swapped. */
struct tcp_conn_key {
	__u16 family; /* AF_INET or AF_INET6 */
	__u16 sport;
	__u16 dport;
	__u16 pad;
	__u8 saddr[16]; /* IPv4 in the first 4 bytes */
	__u8 daddr[16];
};

/* One end of a connection: its owner and its socket's timer state at its latest retransmit
 * (timer.ts_ns 0: none since the connection was established). */
struct tcp_conn_state {
	__u32 tgid; /* 0: owner not known yet (an accepted socket before accept() returns it) */
	__u32 pad;
	__u64 run_start_ns; /* first retransmit of the current run of timeouts */
	struct tcp_timer_state timer;
};
