// The owner of tcp.bpf.c's per-process maps on the user side: reads them into a snapshot for the
// TCP collector and forgets exited processes. No other code walks or writes these maps.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tcp_events.h"

namespace vigil::agent {

// tcp.bpf.c's (pid, peer) counters and per-process socket state, as read at one moment.
struct TcpSnapshot {
  std::map<uint32_t, std::vector<std::pair<tcp_peer_key, tcp_peer_val>>> peers;  // by pid
  std::map<uint32_t, tcp_timer_state> timers;  // by pid: its socket at its latest retransmit
  // Segments counted only at their socket's close (map retrans_settled, summed over CPUs): the
  // kernel ran no program of ours for their retransmit events.
  uint64_t settled_segs = 0;
};

// What the TCP collector reads: the maps, or a snapshot a unit test made.
class TcpReader {
 public:
  virtual ~TcpReader() = default;
  virtual TcpSnapshot read() const = 0;
};

class TcpMaps : public TcpReader {
 public:
  TcpMaps(int peers_fd, int peer_counts_fd, int procs_fd, int settled_fd = -1)
      : peers_fd_(peers_fd), peer_counts_fd_(peer_counts_fd), procs_fd_(procs_fd), settled_fd_(settled_fd) {}
  TcpSnapshot read() const override;
  // Deletes the PIDS' entries from peers, peer_counts and procs.
  void forget(const std::set<uint32_t>& pids) const;

 private:
  int peers_fd_, peer_counts_fd_, procs_fd_, settled_fd_;
};

// Both ends of the node's TCP connections as tcp.bpf.c records them (map `conns`, whose entries
// the kernel side removes when a socket closes): what the correlator reads.
using TcpConnectionEnds = std::vector<std::pair<tcp_conn_key, tcp_conn_state>>;

class TcpConnectionReader {
 public:
  virtual ~TcpConnectionReader() = default;
  virtual TcpConnectionEnds read_connections() const = 0;
};

class TcpConnections : public TcpConnectionReader {
 public:
  explicit TcpConnections(int conns_fd) : conns_fd_(conns_fd) {}
  TcpConnectionEnds read_connections() const override;

 private:
  int conns_fd_;
};

// An address as tcp.bpf.c stores it (IPv4 in the first 4 bytes) in text; "unknown" for another family.
std::string address_text(uint16_t family, const uint8_t* addr);
// CLOCK_MONOTONIC in ns, the clock BPF timestamps use.
uint64_t monotonic_ns();
// Seconds the socket behind `s` has been stalled (consecutive timeouts) at now_ns; 0 when not.
double stall_seconds(const tcp_timer_state& s, uint64_t now_ns);

}  // namespace vigil::agent
