// What a node's agent tells about its TCP connections so that a collective timeout on another
// node can be joined with them in Prometheus (docs/correlation.md, "Across nodes"): a collective
// process's connections stalled now, by local and peer address, and the address pairs it uses.
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <vector>

#include "collectors/metric_builder.h"
#include "correlate/correlator.h"

namespace vigil::agent {

// Filled one collective process at a time (a stall that matters across nodes is a rank's, and the
// connection table is read only where one runs).
struct PeerView {
  PeerView();
  // From the process's connection ends (ends_of: its own, and the other end where that is on this
  // node; only its own count here). tcp_peer_stall_seconds: its connections in RTO backoff without
  // progress for at least a second at now_ns, the longest `top_peers` by (local address, peer);
  // nccl_tcp_collective_peers: its (local address, peer) pairs, the first `top_peers` in address
  // order, 1 each.
  void add(const LabelList& process, const std::vector<ConnectionEnd>& ends, uint64_t now_ns, int top_peers);

  prometheus::MetricFamily stalls, pairs;
};

}  // namespace vigil::agent
