// TCP collector: sums tcp.bpf.c's (pid, peer) counters into series labelled by process and a
// bounded set of peers, and per-process RTO/backoff at the latest retransmit. Only what a process
// has to say gets its own series (a counter still at 0 has none); resets are summed per
// container and program (docs/probes-agent.md, "Series budget").
#include "collectors/tcp_collector.h"

#include <algorithm>
#include <vector>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "probes/bpf_util.h"

namespace vigil::agent {
namespace {

using prometheus::MetricType;

using PeerRow = std::pair<tcp_peer_key, tcp_peer_val>;

// One process's counters summed by peer label. Peers not yet chosen are admitted by their count,
// busiest first, until the process has `top_peers`; the rest add to "other".
std::map<std::string, tcp_peer_val> sum_by_peer(std::vector<PeerRow>& rows, std::set<std::string>& chosen,
                                                int top_peers) {
  std::sort(rows.begin(), rows.end(), [](const PeerRow& a, const PeerRow& b) {
    return a.second.retrans_segs + a.second.resets_sent + a.second.resets_received >
           b.second.retrans_segs + b.second.resets_sent + b.second.resets_received;
  });
  std::map<std::string, tcp_peer_val> sums;
  for (const auto& [key, val] : rows) {
    // Family 0: the process's peers past TCP_PEERS_PER_PROCESS, summed in the kernel.
    std::string peer = key.family == 0 ? "other" : address_text(key.family, key.daddr);
    if (peer != "other" && !chosen.count(peer)) {
      if (static_cast<int>(chosen.size()) < top_peers) chosen.insert(peer);
      else peer = "other";
    }
    auto& s = sums[peer];
    s.retrans_segs += val.retrans_segs;
    s.synack_retrans += val.synack_retrans;
    s.resets_sent += val.resets_sent;
    s.resets_received += val.resets_received;
  }
  return sums;
}

// The series of the (process, peer) counters, only those that have counted something: a counter
// never incremented costs a series and says nothing.
struct PeerFamilies {
  prometheus::MetricFamily retrans = make_family(
      "tcp_retransmits_total",
      "TCP segments retransmitted (as the kernel's RetransSegs counts), by owning process and peer.",
      MetricType::Counter);
  prometheus::MetricFamily synack = make_family(
      "tcp_synack_retransmits_total", "SYN-ACK retransmits of a process's listening sockets, by peer.",
      MetricType::Counter);

  void add(const LabelList& process, const std::string& peer, const tcp_peer_val& s) {
    LabelList l = process;
    l.emplace_back("peer", peer);
    if (s.retrans_segs) add_sample(retrans, l, static_cast<double>(s.retrans_segs));
    if (s.synack_retrans) add_sample(synack, l, static_cast<double>(s.synack_retrans));
  }
};

// A process's resets over all its peers: {sent, received}.
std::pair<uint64_t, uint64_t> resets_of(const std::vector<PeerRow>& rows) {
  std::pair<uint64_t, uint64_t> n{};
  for (const auto& [key, val] : rows) {
    n.first += val.resets_sent;
    n.second += val.resets_received;
  }
  return n;
}

// The process's name as the kernel saw it, for a process gone before /proc was read.
std::string comm_of(uint32_t pid, const std::vector<PeerRow>& rows, const std::map<uint32_t, tcp_timer_state>& states) {
  auto st = states.find(pid);
  return st != states.end() ? bpf_string(st->second.comm) : bpf_string(rows.front().second.comm);
}

// The series of a process's socket at its latest retransmit.
struct TimerFamilies {
  prometheus::MetricFamily rto = make_family(
      "tcp_rto_seconds", "Retransmission timeout of the process's socket at its latest retransmit.", MetricType::Gauge);
  prometheus::MetricFamily backoff = make_family(
      "tcp_backoff", "Exponential backoff exponent (icsk_backoff) at the latest retransmit.", MetricType::Gauge);
  prometheus::MetricFamily consecutive = make_family(
      "tcp_consecutive_retransmits",
      "Retransmits of the same data without progress (icsk_retransmits) at the latest retransmit.",
      MetricType::Gauge);
  prometheus::MetricFamily srtt =
      make_family("tcp_srtt_seconds", "Smoothed RTT of the socket at the latest retransmit.", MetricType::Gauge);
  prometheus::MetricFamily stall = make_family(
      "tcp_stall_seconds",
      "How long the process's latest retransmitting socket has been timing out without progress; 0 when it is not.",
      MetricType::Gauge);

  void add(const LabelList& process, const tcp_timer_state& s, uint64_t now_ns) {
    add_sample(rto, process, static_cast<double>(s.rto_us) / 1e6);
    add_sample(backoff, process, s.backoff);
    add_sample(consecutive, process, s.retransmits);
    add_sample(srtt, process, static_cast<double>(s.srtt_us) / 1e6);
    add_sample(stall, process, stall_seconds(s, now_ns));
  }
};

}  // namespace

void TcpCollector::retire(const TcpSnapshot& snapshot, const std::set<uint32_t>& dead) const {
  // One lock over moving the resets of DEAD into the retired sums and marking them retired:
  // no render counts them twice or not at all.
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  std::set<LabelList> alive;  // groups with a member whose counts stay in the map
  for (const auto& [pid, rows] : snapshot.peers) {
    if (pid == 0) continue;
    const LabelList group = group_of(process_labels(processes_, pid, comm_of(pid, rows, snapshot.timers)));
    if (!dead.count(pid)) {
      alive.insert(group);
      continue;
    }
    const auto [sent, received] = resets_of(rows);
    retired_resets_.retire(group, {sent, received}, now);
  }
  retired_resets_.expire(alive, now);
  retired_pids_ = dead;
  for (uint32_t pid : dead) chosen_.erase(pid);
}

std::vector<prometheus::MetricFamily> TcpCollector::Collect() const {
  std::lock_guard lock(mu_);
  TcpSnapshot snapshot = maps_.read();
  for (uint32_t pid : retired_pids_) {
    snapshot.peers.erase(pid);
    snapshot.timers.erase(pid);
  }
  const auto& states = snapshot.timers;
  PeerFamilies peers;
  TimerFamilies timers;
  const uint64_t now = monotonic_ns();

  std::map<LabelList, ResetCounts> resets = retired_resets_.sums();
  for (auto& [pid, rows] : snapshot.peers) {
    const LabelList process = process_labels(processes_, pid, comm_of(pid, rows, states));
    for (const auto& [peer, sums] : sum_by_peer(rows, chosen_[pid], top_peers_)) peers.add(process, peer, sums);
    const auto [sent, received] = resets_of(rows);
    if (sent || received) resets[group_of(process)] += {sent, received};
  }
  for (const auto& [pid, s] : states) timers.add(process_labels(processes_, pid, bpf_string(s.comm)), s, now);
  prometheus::MetricFamily reset_family = make_family(
      "tcp_resets_total", "TCP resets sent or received, by container and program (not by process).",
      MetricType::Counter);
  for (const auto& [labels, r] : resets) {
    LabelList sent = labels, recv = labels;
    sent.emplace_back("direction", "sent");
    recv.emplace_back("direction", "received");
    add_sample(reset_family, sent, static_cast<double>(r.sent));
    add_sample(reset_family, recv, static_cast<double>(r.received));
  }
  // Always there: 0 says the kernel skipped none of the closed sockets' retransmit events.
  prometheus::MetricFamily settled = make_family(
      "vigil_agent_tcp_settled_retransmits_total",
      "Retransmitted segments the TCP set counted only when their socket closed, because the kernel ran none of its "
      "programs for their retransmit events (already in tcp_retransmits_total; docs/probes-agent.md).",
      MetricType::Counter);
  add_sample(settled, {}, static_cast<double>(snapshot.settled_segs));
  return {peers.retrans, peers.synack, reset_family, timers.rto, timers.backoff, timers.consecutive, timers.srtt,
          timers.stall, settled};
}

}  // namespace vigil::agent
