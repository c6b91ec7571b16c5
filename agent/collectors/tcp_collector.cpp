// TCP collector: sums tcp.bpf.c's (pid, peer) counters into series labelled by process and a
// bounded set of peers, and per-process RTO/backoff at the latest retransmit. Only what a process
// has to say gets its own series (a counter still at 0 has none); resets are summed per
// container and program (docs/probes-agent.md, "Series budget").
#include "collectors/tcp_collector.h"

#include <arpa/inet.h>
#include <linux/types.h>

#include <algorithm>
#include <ctime>
#include <vector>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "probes/bpf_util.h"
#include "tcp_events.h"

namespace vigil::agent {
namespace {

using prometheus::MetricType;

struct PeerRow {
  tcp_peer_key key;
  tcp_peer_val val;
};

// tcp.bpf.c's (pid, peer) counters, by pid.
std::map<uint32_t, std::vector<PeerRow>> read_peers(int peers_fd) {
  std::map<uint32_t, std::vector<PeerRow>> by_pid;
  for (const auto& k : map_keys<tcp_peer_key>(peers_fd)) {
    tcp_peer_val v{};
    if (bpf_map_lookup_elem(peers_fd, &k, &v) == 0) by_pid[k.tgid].push_back({k, v});
  }
  return by_pid;
}

// tcp.bpf.c's per-process socket state at the latest retransmit.
std::map<uint32_t, tcp_timer_state> read_timer_states(int procs_fd) {
  return map_entries<uint32_t, tcp_timer_state>(procs_fd);
}

// One process's counters summed by peer label. Peers not yet chosen are admitted by their count,
// busiest first, until the process has `top_peers`; the rest add to "other".
std::map<std::string, tcp_peer_val> sum_by_peer(std::vector<PeerRow>& rows, std::set<std::string>& chosen,
                                                int top_peers) {
  std::sort(rows.begin(), rows.end(), [](const PeerRow& a, const PeerRow& b) {
    return a.val.retrans_segs + a.val.resets_sent + a.val.resets_received >
           b.val.retrans_segs + b.val.resets_sent + b.val.resets_received;
  });
  std::map<std::string, tcp_peer_val> sums;
  for (const auto& r : rows) {
    // Family 0: the process's peers past TCP_PEERS_PER_PROCESS, summed in the kernel.
    std::string peer = r.key.family == 0 ? "other" : address_text(r.key.family, r.key.daddr);
    if (peer != "other" && !chosen.count(peer)) {
      if (static_cast<int>(chosen.size()) < top_peers) chosen.insert(peer);
      else peer = "other";
    }
    auto& s = sums[peer];
    s.retrans_segs += r.val.retrans_segs;
    s.synack_retrans += r.val.synack_retrans;
    s.resets_sent += r.val.resets_sent;
    s.resets_received += r.val.resets_received;
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
  for (const auto& r : rows) {
    n.first += r.val.resets_sent;
    n.second += r.val.resets_received;
  }
  return n;
}

// The process's name as the kernel saw it, for a process gone before /proc was read.
std::string comm_of(uint32_t pid, const std::vector<PeerRow>& rows, const std::map<uint32_t, tcp_timer_state>& states) {
  auto st = states.find(pid);
  return st != states.end() ? bpf_string(st->second.comm) : bpf_string(rows.front().val.comm);
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

std::string address_text(uint16_t family, const uint8_t* addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family != AF_INET6 && family != AF_INET) return "unknown";
  inet_ntop(family, addr, buf, sizeof buf);
  return buf;
}

uint64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // the clock of bpf_ktime_get_ns
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ULL + static_cast<uint64_t>(t.tv_nsec);
}

double stall_seconds(const tcp_timer_state& s, uint64_t now_ns) {
  if (!s.stall_start_ns || now_ns < s.ts_ns) return 0;
  // The next timeout fires 2 x RTO after the latest (the kernel doubles it, up to 120 s). Well
  // past that with no new retransmit, the socket made progress or gave up: no stall.
  double next = std::min(2.0 * static_cast<double>(s.rto_us) / 1e6, 120.0);
  double since_last = static_cast<double>(now_ns - s.ts_ns) / 1e9;
  if (since_last > next + std::max(1.0, next / 2)) return 0;
  return static_cast<double>(now_ns - s.stall_start_ns) / 1e9;
}

void TcpCollector::expire() const {
  // One lock over moving the resets of the processes to be dropped into the retired sums and
  // dropping them, and Collect reads the maps under it too: no render counts them twice or not at all.
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  const auto states = read_timer_states(procs_fd_);
  std::set<uint32_t> dead;
  std::set<LabelList> alive;  // groups with a member whose counts stay in the map
  for (const auto& [pid, rows] : read_peers(peers_fd_)) {
    if (pid == 0) continue;
    const LabelList group = group_of(process_labels(processes_, pid, comm_of(pid, rows, states)));
    if (!processes_.expired(pid)) {
      alive.insert(group);
      continue;
    }
    dead.insert(pid);
    const auto [sent, received] = resets_of(rows);
    retired_resets_.retire(group, {sent, received}, now);
  }
  retired_resets_.expire(alive, now);
  for (const auto& k : map_keys<tcp_peer_key>(peers_fd_))
    if (dead.count(k.tgid)) bpf_map_delete_elem(peers_fd_, &k);
  for (uint32_t pid : dead) bpf_map_delete_elem(peer_counts_fd_, &pid);
  for (const auto& pid : map_keys<__u32>(procs_fd_))
    if (pid != 0 && (dead.count(pid) || processes_.expired(pid))) {
      dead.insert(pid);
      bpf_map_delete_elem(procs_fd_, &pid);
    }
  for (uint32_t pid : dead) chosen_.erase(pid);
}

std::vector<prometheus::MetricFamily> TcpCollector::Collect() const {
  std::lock_guard lock(mu_);
  auto by_pid = read_peers(peers_fd_);
  const auto states = read_timer_states(procs_fd_);
  PeerFamilies peers;
  TimerFamilies timers;
  const uint64_t now = monotonic_ns();

  std::map<LabelList, ResetCounts> resets = retired_resets_.sums();
  for (auto& [pid, rows] : by_pid) {
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
  return {peers.retrans, peers.synack, reset_family, timers.rto, timers.backoff, timers.consecutive, timers.srtt,
          timers.stall};
}

}  // namespace vigil::agent
