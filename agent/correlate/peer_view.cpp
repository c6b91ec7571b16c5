// PeerView: per-peer TCP stall state and collective address pairs from tcp.bpf.c's connection
// ends. Addresses, never ports: a pair names two hosts (or pods), which is what the join needs,
// and ports would make a series per connection.
#include "correlate/peer_view.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "probes/tcp_maps.h"

namespace vigil::agent {
namespace {

using AddressPair = std::pair<std::string, std::string>;  // local address, peer

// Shorter stalls are the ordinary repair of a lost segment (a timeout or two of 200 ms and up, on
// any lossy link): as series they would come and go by the minute and explain no collective
// timeout, which takes seconds at least.
constexpr double kMinStallSeconds = 1.0;

LabelList with_pair(LabelList labels, const AddressPair& pair) {
  labels.emplace_back("local_address", pair.first);
  labels.emplace_back("peer", pair.second);
  return labels;
}

}  // namespace

PeerView::PeerView()
    : stalls(make_family("tcp_peer_stall_seconds",
                         "How long the process's TCP connection from local_address to peer has been in RTO "
                         "backoff without progress; present only while it is.",
                         prometheus::MetricType::Gauge)),
      pairs(make_family("nccl_tcp_collective_peers",
                        "Address pairs (local_address, peer) of the TCP connections a collective process holds, "
                        "1 each: the peer node's agent reports their stalls (tcp_peer_stall_seconds).",
                        prometheus::MetricType::Gauge)) {}

void PeerView::add(const LabelList& process, const std::vector<ConnectionEnd>& ends, uint64_t now_ns,
                   int top_peers) {
  std::set<AddressPair> used;
  std::map<AddressPair, double> longest;  // by pair, the longest stall
  for (const ConnectionEnd& e : ends) {
    if (!e.own) continue;
    const AddressPair pair{address_text(e.key.family, e.key.saddr), address_text(e.key.family, e.key.daddr)};
    used.insert(pair);
    if (const double s = stall_seconds(e.state.timer, now_ns); s >= kMinStallSeconds)
      longest[pair] = std::max(longest[pair], s);
  }
  std::vector<std::pair<AddressPair, double>> rows(longest.begin(), longest.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  rows.resize(std::min(rows.size(), static_cast<size_t>(std::max(top_peers, 1))));
  for (const auto& [pair, s] : rows) add_sample(stalls, with_pair(process, pair), s);
  int n = 0;
  for (const AddressPair& pair : used) {
    if (n++ == top_peers) break;
    add_sample(pairs, with_pair(process, pair), 1);
  }
}

}  // namespace vigil::agent
