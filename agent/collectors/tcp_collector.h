// Exports TCP retransmits, resets, RTO and backoff per process from a snapshot of tcp.bpf.c's maps.
#pragma once

#include <prometheus/collectable.h>

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "collectors/group_sums.h"
#include "collectors/metric_builder.h"
#include "discovery/process_table.h"
#include "probes/tcp_maps.h"

namespace vigil::agent {

class TcpCollector : public prometheus::Collectable {
 public:
  TcpCollector(const TcpReader& maps, int top_peers, ProcessTable& processes)
      : maps_(maps), top_peers_(top_peers), processes_(processes), retired_resets_(processes.grace()) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

  // Before the set has the map owner forget DEAD (processes gone past the grace period): keeps
  // their resets in their group's sums and drops their peer choices; their entries in SNAPSHOT
  // are not rendered again. Groups without a live member in SNAPSHOT are dropped once they linger.
  void retire(const TcpSnapshot& snapshot, const std::set<uint32_t>& dead) const;

 private:
  const TcpReader& maps_;
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
  // Retired at the latest retire(), so forgotten by the map owner right after it: a scrape
  // between the two must not count their resets a second time.
  mutable std::set<uint32_t> retired_pids_;
};

}  // namespace vigil::agent
