// peer_view: per-peer TCP stall state and collective address pairs from tcp.bpf.c's connection
// ends. Addresses, never ports: a pair names two hosts (or pods), which is what the join needs,
// and ports would make a series per connection.
#include "correlate/peer_view.h"

#include <algorithm>
#include <set>
#include <utility>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "collectors/tcp_collector.h"
#include "probes/bpf_util.h"

namespace vigil::agent {
namespace {

using AddressPair = std::pair<std::string, std::string>;  // local address, peer

// Shorter stalls are the ordinary repair of a lost segment (a timeout or two of 200 ms and up, on
// any lossy link): as series they would come and go by the minute and explain no collective
// timeout, which takes seconds at least.
constexpr double kMinStallSeconds = 1.0;

AddressPair addresses_of(const tcp_conn_key& k) {
  return {address_text(k.family, k.saddr), address_text(k.family, k.daddr)};
}

LabelList with_pair(LabelList labels, const AddressPair& pair) {
  labels.emplace_back("local_address", pair.first);
  labels.emplace_back("peer", pair.second);
  return labels;
}

}  // namespace

std::vector<prometheus::MetricFamily> peer_view(const ConnectionTable& conns,
                                                const std::map<uint32_t, std::string>& collective,
                                                uint64_t now_ns, int top_peers, ProcessTable& processes) {
  using prometheus::MetricType;
  auto stalls = make_family("tcp_peer_stall_seconds",
                            "How long the process's TCP connection from local_address to peer has been in RTO "
                            "backoff without progress; present only while it is.",
                            MetricType::Gauge);
  auto pairs = make_family("nccl_tcp_collective_peers",
                           "Address pairs (local_address, peer) of the TCP connections a collective process holds, "
                           "1 each: the peer node's agent reports their stalls (tcp_peer_stall_seconds).",
                           MetricType::Gauge);

  // pid -> (comm, the longest stall per address pair)
  std::map<uint32_t, std::pair<std::string, std::map<AddressPair, double>>> stalled;
  std::map<uint32_t, std::set<AddressPair>> used;
  for (const ConnectionEnd& e : conns.owned_ends()) {
    const uint32_t pid = e.state.tgid;
    if (!collective.count(pid)) continue;
    used[pid].insert(addresses_of(e.key));
    const double s = stall_seconds(e.state.timer, now_ns);
    if (s < kMinStallSeconds) continue;
    auto& [comm, by_pair] = stalled[pid];
    comm = bpf_string(e.state.timer.comm);
    double& longest = by_pair[addresses_of(e.key)];
    longest = std::max(longest, s);
  }
  for (const auto& [pid, entry] : stalled) {
    std::vector<std::pair<AddressPair, double>> rows(entry.second.begin(), entry.second.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    rows.resize(std::min(rows.size(), static_cast<size_t>(std::max(top_peers, 1))));
    const LabelList process = process_labels(processes, pid, entry.first);
    for (const auto& [pair, s] : rows) add_sample(stalls, with_pair(process, pair), s);
  }
  for (const auto& [pid, set] : used) {
    const LabelList process = process_labels(processes, pid, collective.at(pid));
    int n = 0;
    for (const AddressPair& pair : set) {
      if (n++ == top_peers) break;
      add_sample(pairs, with_pair(process, pair), 1);
    }
  }
  return {stalls, pairs};
}

}  // namespace vigil::agent
