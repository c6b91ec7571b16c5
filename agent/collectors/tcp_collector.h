// Exports TCP retransmits, resets, RTO and backoff per process from tcp.bpf.c's maps at scrape time.
#pragma once

#include <prometheus/collectable.h>

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "collectors/group_sums.h"
#include "collectors/metric_builder.h"
#include "discovery/process_table.h"

struct tcp_timer_state;

namespace vigil::agent {

// An address as tcp.bpf.c stores it (IPv4 in the first 4 bytes) in text; "unknown" for another family.
std::string address_text(uint16_t family, const uint8_t* addr);
// CLOCK_MONOTONIC in ns, the clock BPF timestamps use.
uint64_t monotonic_ns();
// Seconds the socket behind `s` has been stalled (consecutive timeouts) at now_ns; 0 when not.
double stall_seconds(const tcp_timer_state& s, uint64_t now_ns);

class TcpCollector : public prometheus::Collectable {
 public:
  // peer_counts_fd: tcp.bpf.c's entries per process in peers (dropped with them).
  TcpCollector(int peers_fd, int peer_counts_fd, int procs_fd, int top_peers, ProcessTable& processes)
      : peers_fd_(peers_fd), peer_counts_fd_(peer_counts_fd), procs_fd_(procs_fd), top_peers_(top_peers),
        processes_(processes), retired_resets_(processes.grace()) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

  // Drops kernel state and peer choices of processes gone longer than the grace period.
  void expire() const;

 private:
  int peers_fd_;
  int peer_counts_fd_;
  int procs_fd_;
  int top_peers_;
  ProcessTable& processes_;
  mutable std::mutex mu_;
  // Peers given their own series, per pid: once chosen a peer keeps its series, so counters
  // stay monotonic; later peers beyond top_peers_ add to peer="other".
  mutable std::map<uint32_t, std::set<std::string>> chosen_;
  // Resets are counted per container and program, not per process (a client that is refused
  // lives a moment and says nothing else: per pid it would be a new series each time). The
  // counts of processes whose kernel state is dropped stay in the group (group_sums.h).
  struct ResetCounts {
    uint64_t sent = 0, received = 0;
    ResetCounts& operator+=(const ResetCounts& o) {
      sent += o.sent;
      received += o.received;
      return *this;
    }
  };
  mutable RetiredSums<ResetCounts> retired_resets_;
};

}  // namespace vigil::agent
