// TCP collector: sums tcp.bpf.c's (pid, peer) counters into series labelled by process and a
// bounded set of peers, and per-process RTO/backoff at the latest retransmit.
#include "collectors/tcp_collector.h"

#include <arpa/inet.h>
#include <linux/types.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <vector>

#include "export/metric_builder.h"
#include "probes/bpf_util.h"
#include "tcp.h"

namespace vigil::agent {
namespace {

std::string peer_text(const tcp_peer_key& k) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (k.family == AF_INET6) inet_ntop(AF_INET6, k.daddr, buf, sizeof buf);
  else if (k.family == AF_INET) inet_ntop(AF_INET, k.daddr, buf, sizeof buf);
  else return "unknown";
  return buf;
}

LabelList process_labels(uint32_t pid, const ProcessLabels& p, const std::string& kernel_comm) {
  std::string comm = p.comm.empty() ? kernel_comm : p.comm;
  if (pid == 0) comm = "[unattributed]";
  return {{"pid", std::to_string(pid)},
          {"comm", comm},
          {"container_id", p.identity.container_id},
          {"pod_uid", p.identity.pod_uid}};
}

}  // namespace

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
  std::set<uint32_t> dead;
  for (const auto& k : map_keys<tcp_peer_key>(peers_fd_))
    if (k.tgid != 0 && (dead.count(k.tgid) || processes_.expired(k.tgid))) {
      dead.insert(k.tgid);
      bpf_map_delete_elem(peers_fd_, &k);
    }
  for (const auto& pid : map_keys<__u32>(procs_fd_))
    if (pid != 0 && (dead.count(pid) || processes_.expired(pid))) {
      dead.insert(pid);
      bpf_map_delete_elem(procs_fd_, &pid);
    }
  std::lock_guard lock(mu_);
  for (uint32_t pid : dead) chosen_.erase(pid);
}

std::vector<prometheus::MetricFamily> TcpCollector::Collect() const {
  using prometheus::MetricType;
  struct Row {
    tcp_peer_key key;
    tcp_peer_val val;
  };
  std::map<uint32_t, std::vector<Row>> by_pid;
  for (const auto& k : map_keys<tcp_peer_key>(peers_fd_)) {
    tcp_peer_val v{};
    if (bpf_map_lookup_elem(peers_fd_, &k, &v) == 0) by_pid[k.tgid].push_back({k, v});
  }
  std::map<uint32_t, tcp_timer_state> states;
  for (const auto& pid : map_keys<__u32>(procs_fd_)) {
    tcp_timer_state s{};
    if (bpf_map_lookup_elem(procs_fd_, &pid, &s) == 0) states[pid] = s;
  }

  auto retrans = make_family("tcp_retransmits_total",
                             "TCP segments retransmitted (as the kernel's RetransSegs counts), by owning process and peer.",
                             MetricType::Counter);
  auto synack = make_family("tcp_synack_retransmits_total",
                            "SYN-ACK retransmits of a process's listening sockets, by peer.", MetricType::Counter);
  auto resets = make_family("tcp_resets_total", "TCP resets sent or received, by process and peer.",
                            MetricType::Counter);
  auto rto = make_family("tcp_rto_seconds", "Retransmission timeout of the process's socket at its latest retransmit.",
                         MetricType::Gauge);
  auto backoff = make_family("tcp_backoff", "Exponential backoff exponent (icsk_backoff) at the latest retransmit.",
                             MetricType::Gauge);
  auto consecutive = make_family("tcp_consecutive_retransmits",
                                 "Retransmits of the same data without progress (icsk_retransmits) at the latest retransmit.",
                                 MetricType::Gauge);
  auto srtt = make_family("tcp_srtt_seconds", "Smoothed RTT of the socket at the latest retransmit.", MetricType::Gauge);
  auto stall = make_family("tcp_stall_seconds",
                           "How long the process's latest retransmitting socket has been timing out without progress; 0 when it is not.",
                           MetricType::Gauge);
  uint64_t now = monotonic_ns();

  std::lock_guard lock(mu_);
  for (auto& [pid, rows] : by_pid) {
    auto st = states.find(pid);
    std::string kcomm = st == states.end() ? "" : std::string(st->second.comm, strnlen(st->second.comm, VIGIL_COMM_LEN));
    LabelList base = process_labels(pid, processes_.labels(pid), kcomm);
    // Admit new peers by their count, busiest first, until the process has top_peers_.
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return a.val.retrans_segs + a.val.resets_sent + a.val.resets_received >
             b.val.retrans_segs + b.val.resets_sent + b.val.resets_received;
    });
    auto& chosen = chosen_[pid];
    std::map<std::string, tcp_peer_val> sums;
    for (const auto& r : rows) {
      std::string peer = peer_text(r.key);
      if (!chosen.count(peer)) {
        if (static_cast<int>(chosen.size()) < top_peers_) chosen.insert(peer);
        else peer = "other";
      }
      auto& s = sums[peer];
      s.retrans_segs += r.val.retrans_segs;
      s.synack_retrans += r.val.synack_retrans;
      s.resets_sent += r.val.resets_sent;
      s.resets_received += r.val.resets_received;
    }
    for (const auto& [peer, s] : sums) {
      LabelList l = base;
      l.emplace_back("peer", peer);
      add_sample(retrans, l, static_cast<double>(s.retrans_segs));
      add_sample(synack, l, static_cast<double>(s.synack_retrans));
      LabelList sent = l, recv = l;
      sent.emplace_back("direction", "sent");
      recv.emplace_back("direction", "received");
      add_sample(resets, sent, static_cast<double>(s.resets_sent));
      add_sample(resets, recv, static_cast<double>(s.resets_received));
    }
  }
  for (const auto& [pid, s] : states) {
    LabelList l = process_labels(pid, processes_.labels(pid),
                                 std::string(s.comm, strnlen(s.comm, VIGIL_COMM_LEN)));
    add_sample(rto, l, static_cast<double>(s.rto_us) / 1e6);
    add_sample(backoff, l, s.backoff);
    add_sample(consecutive, l, s.retransmits);
    add_sample(srtt, l, static_cast<double>(s.srtt_us) / 1e6);
    add_sample(stall, l, stall_seconds(s, now));
  }
  return {retrans, synack, resets, rto, backoff, consecutive, srtt, stall};
}

}  // namespace vigil::agent
