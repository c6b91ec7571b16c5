// What a node's agent tells about its TCP connections so that a collective timeout on another
// node can be joined with them in Prometheus (docs/correlation.md, "Across nodes"): the
// connections stalled now, by local and peer address, and the address pairs collectives use.
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "correlate/correlator.h"
#include "discovery/process_table.h"

namespace vigil::agent {

// For the collective processes (pid -> comm) only: a stall that matters across nodes is a rank's,
// and the connection table is read only where one runs.
// tcp_peer_stall_seconds: per process, the connections in RTO backoff without progress for at
// least a second at now_ns (series only while they are), the longest `top_peers` of them by
// (local address, peer).
// nccl_tcp_collective_peers: per process, the (local address, peer) pairs of its connections,
// the first `top_peers` in address order, 1 each.
std::vector<prometheus::MetricFamily> peer_view(const ConnectionTable& conns,
                                                const std::map<uint32_t, std::string>& collective,
                                                uint64_t now_ns, int top_peers, ProcessTable& processes);

}  // namespace vigil::agent
