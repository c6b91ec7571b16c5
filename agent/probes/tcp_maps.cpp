// Reads and forgets tcp.bpf.c's per-process maps, reads its connection ends; the text and clock helpers for its values.
#include "probes/tcp_maps.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <ctime>
#include <vector>

#include "probes/bpf_util.h"

namespace vigil::agent {

TcpSnapshot TcpMaps::read() const {
  TcpSnapshot s;
  for (const auto& k : map_keys<tcp_peer_key>(peers_fd_)) {
    tcp_peer_val v{};
    if (bpf_map_lookup_elem(peers_fd_, &k, &v) == 0) s.peers[k.tgid].emplace_back(k, v);
  }
  s.timers = map_entries<uint32_t, tcp_timer_state>(procs_fd_);
  const int ncpu = libbpf_num_possible_cpus();
  if (settled_fd_ >= 0 && ncpu > 0) {
    std::vector<__u64> per_cpu(static_cast<size_t>(ncpu));
    __u32 key = 0;
    if (bpf_map_lookup_elem(settled_fd_, &key, per_cpu.data()) == 0)
      for (__u64 v : per_cpu) s.settled_segs += v;
  }
  return s;
}

void TcpMaps::forget(const std::set<uint32_t>& pids) const {
  if (pids.empty()) return;
  for (const auto& k : map_keys<tcp_peer_key>(peers_fd_))
    if (pids.count(k.tgid)) bpf_map_delete_elem(peers_fd_, &k);
  for (uint32_t pid : pids) {
    bpf_map_delete_elem(peer_counts_fd_, &pid);
    bpf_map_delete_elem(procs_fd_, &pid);
  }
}

TcpConnectionEnds TcpConnections::read_connections() const {
  TcpConnectionEnds ends;
  for (const auto& k : map_keys<tcp_conn_key>(conns_fd_)) {
    tcp_conn_state s{};
    if (bpf_map_lookup_elem(conns_fd_, &k, &s) == 0) ends.emplace_back(k, s);
  }
  return ends;
}

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

}  // namespace vigil::agent
