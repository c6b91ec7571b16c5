// The correlation decision and its metrics. The TCP side is tcp.bpf.c's per-connection-end state
// at the latest retransmit (owner, timer state, run-of-timeouts start); the collective side is an
// event with an end time and a duration. Both clocks are CLOCK_MONOTONIC (bpf_ktime_get_ns).
#include "correlate/correlator.h"

#include <linux/types.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "collective_events.h"
#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "probes/tcp_maps.h"
#include "correlate/peer_view.h"
#include "nccl_events.h"
#include "probes/bpf_util.h"
#include "tcp_events.h"

namespace vigil::agent {
namespace {

const char* const kOpNames[] = {"unknown", "all_gather", "all_reduce", "broadcast", "barrier"};

tcp_conn_key other_end(const tcp_conn_key& k) {
  tcp_conn_key o = k;
  std::swap(o.sport, o.dport);
  std::memcpy(o.saddr, k.daddr, sizeof o.saddr);
  std::memcpy(o.daddr, k.saddr, sizeof o.daddr);
  return o;
}

}  // namespace

ConnectionTable::ConnectionTable(const TcpConnectionEnds& ends) {
  for (const auto& [key, state] : ends) add(key, state);
}

bool ConnectionTable::KeyLess::operator()(const tcp_conn_key& a, const tcp_conn_key& b) const {
  return std::memcmp(&a, &b, sizeof a) < 0;
}

void ConnectionTable::add(const tcp_conn_key& key, const tcp_conn_state& state) {
  tcp_conn_key k{};  // no padding bytes in the index
  k.family = key.family;
  k.sport = key.sport;
  k.dport = key.dport;
  std::memcpy(k.saddr, key.saddr, sizeof k.saddr);
  std::memcpy(k.daddr, key.daddr, sizeof k.daddr);
  ends_[k] = state;
}

std::vector<ConnectionEnd> ConnectionTable::ends_of(uint32_t pid) const {
  std::vector<ConnectionEnd> out;
  if (pid == 0) return out;
  for (const auto& [key, state] : ends_) {
    if (state.tgid != pid) continue;
    out.push_back({key, state, true});
    auto peer = ends_.find(other_end(key));
    if (peer != ends_.end()) out.push_back({peer->first, peer->second, false});
  }
  return out;
}

const ConnectionEnd* backoff_in_window(const std::vector<ConnectionEnd>& ends, uint64_t window_start_ns,
                                       uint64_t end_ns) {
  for (const auto& e : ends)
    if (tcp_backoff_in_window(e.state.timer, window_start_ns, end_ns)) return &e;
  return nullptr;
}

double timeout_risk_ratio(const std::vector<ConnectionEnd>& ends, uint64_t now_ns, double timeout_seconds) {
  double risk = 0;
  for (const auto& e : ends) risk = std::max(risk, timeout_risk_ratio(e.state.timer, now_ns, timeout_seconds));
  return risk;
}

bool tcp_backoff_in_window(const tcp_timer_state& tcp, uint64_t window_start_ns, uint64_t end_ns) {
  return tcp.stall_start_ns && tcp.stall_start_ns <= end_ns && tcp.ts_ns >= window_start_ns;
}

double timeout_risk_ratio(const tcp_timer_state& tcp, uint64_t now_ns, double timeout_seconds) {
  const double stall = stall_seconds(tcp, now_ns);
  if (stall <= 0 || timeout_seconds <= 0) return 0;
  return (stall + std::min(2.0 * static_cast<double>(tcp.rto_us) / 1e6, 120.0)) / timeout_seconds;
}

Correlator::Correlator(const TcpConnectionReader& connections, const NcclReader* nccl,
                       const CollectiveReader* collective, std::chrono::milliseconds nccl_timeout, int top_peers,
                       ProcessTable& processes)
    : connections_(connections),
      nccl_(nccl),
      collective_(collective),
      nccl_timeout_(nccl_timeout),
      top_peers_(top_peers),
      processes_(processes) {}

void Correlator::record(uint32_t pid, const std::string& comm, const char* source, const char* kind,
                        uint64_t window_start_ns, uint64_t end_ns, const std::string& what) {
  const std::vector<ConnectionEnd> ends = ConnectionTable(connections_.read_connections()).ends_of(pid);
  const ConnectionEnd* stalled = backoff_in_window(ends, window_start_ns, end_ns);
  {
    std::lock_guard lock(mu_);
    auto& c = counts_[{pid, source, kind}];
    (stalled ? c.first : c.second)++;
    comms_[pid] = comm;
  }
  if (stalled) {
    const tcp_timer_state& tcp = stalled->state.timer;
    char peer[64] = "";
    if (!stalled->own)
      std::snprintf(peer, sizeof peer, " of the peer (pid %u, port %u)", stalled->state.tgid, stalled->key.sport);
    std::fprintf(stderr,
                 "vigil-agent: correlation: pid=%u comm=%s %s: TCP was backing off on the socket%s of port %u -> %u "
                 "(latest retransmit %.3f s before the failure, %u consecutive, rto %.3f s, backoff %u)\n",
                 pid, comm.c_str(), what.c_str(), peer, stalled->own ? stalled->key.sport : stalled->key.dport,
                 stalled->own ? stalled->key.dport : stalled->key.sport,
                 end_ns >= tcp.ts_ns ? static_cast<double>(end_ns - tcp.ts_ns) / 1e9 : 0.0, tcp.retransmits,
                 static_cast<double>(tcp.rto_us) / 1e6, tcp.backoff);
  } else {
    std::fprintf(stderr,
                 "vigil-agent: correlation: pid=%u comm=%s %s: no TCP RTO backoff on either end of its %zu "
                 "connection ends in the %.1f s before it\n",
                 pid, comm.c_str(), what.c_str(), ends.size(), static_cast<double>(end_ns - window_start_ns) / 1e9);
  }
}

void Correlator::on_collective_failure(const collective_failure& f) {
  const char* kind = f.status == 1 ? "timeout" : "error";
  const uint64_t start = f.ts_ns - std::min(f.ts_ns, f.elapsed_ns + kCorrelationLookbackNs);
  char what[160];
  std::snprintf(what, sizeof what, "%s %s after %.3f s (timeout %llu ms)", kOpNames[f.op < 5 ? f.op : 0], kind,
                static_cast<double>(f.elapsed_ns) / 1e9, static_cast<unsigned long long>(f.timeout_ms));
  record(f.tgid, bpf_string(f.comm), "worker", kind, start, f.ts_ns, what);
}

void Correlator::poll_nccl() {
  if (!nccl_) return;
  const NcclSnapshot nccl = nccl_->read(kNcclProcs | kNcclAsync);
  std::map<uint32_t, uint64_t> async;
  for (const auto& [k, n] : nccl.async) async[k.tgid] += n;
  const uint64_t now = monotonic_ns();
  const uint64_t window = static_cast<uint64_t>(nccl_timeout_.count()) * 1'000'000ULL + kCorrelationLookbackNs;
  for (const auto& [pid, p] : nccl.procs) {
    std::pair<uint64_t, uint64_t> seen, now_counts{p.aborts, async[pid]};
    {
      std::lock_guard lock(mu_);
      seen = nccl_seen_[pid];
      nccl_seen_[pid] = now_counts;
    }
    const std::string comm = bpf_string(p.comm);
    const uint64_t start = now - std::min(now, window);
    for (uint64_t i = seen.first; i < now_counts.first; ++i) record(pid, comm, "nccl", "abort", start, now, "ncclCommAbort");
    for (uint64_t i = seen.second; i < now_counts.second; ++i)
      record(pid, comm, "nccl", "error", start, now, "NCCL async error");
  }
}

void Correlator::expire() {
  std::set<uint32_t> pids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [pid, comm] : comms_) pids.insert(pid);
    for (const auto& [pid, seen] : nccl_seen_) pids.insert(pid);
  }
  for (uint32_t pid : pids) {
    if (!processes_.expired(pid)) continue;
    std::lock_guard lock(mu_);
    std::erase_if(counts_, [&](const auto& kv) { return std::get<0>(kv.first) == pid; });
    comms_.erase(pid);
    nccl_seen_.erase(pid);
  }
}

std::vector<prometheus::MetricFamily> Correlator::Collect() const {
  using prometheus::MetricType;
  auto correlated = make_family("nccl_tcp_correlated_timeouts_total",
                                "Failed collectives (timeout, error, abort) while a TCP connection of the process was "
                                "in RTO backoff at either end.",
                                MetricType::Counter);
  auto uncorrelated = make_family("nccl_tcp_uncorrelated_timeouts_total",
                                  "Failed collectives with no TCP RTO backoff at either end of the process's connections "
                                  "in the window before them.",
                                  MetricType::Counter);
  auto risk = make_family("nccl_tcp_timeout_risk_ratio",
                          "(TCP stall so far + wait until the next retransmit) / the process's collective timeout, "
                          "worst end of the process's connections.",
                          MetricType::Gauge);
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, c] : counts_) {
      LabelList l = process_labels(processes_, std::get<0>(key), comms_.at(std::get<0>(key)));
      l.push_back({"source", std::get<1>(key)});
      l.push_back({"kind", std::get<2>(key)});
      add_sample(correlated, l, static_cast<double>(c.first));
      add_sample(uncorrelated, l, static_cast<double>(c.second));
    }
  }
  // Processes with collectives: the worker's (their own timeout) and NCCL's (the configured one).
  std::map<uint32_t, std::pair<double, std::string>> timeouts;
  if (nccl_)
    for (const auto& [pid, p] : nccl_->read(kNcclProcs).procs)
      timeouts[pid] = {std::chrono::duration<double>(nccl_timeout_).count(), bpf_string(p.comm)};
  if (collective_)
    for (const auto& [pid, p] : collective_->read().procs)
      if (p.timeout_ms > 0) timeouts[pid] = {static_cast<double>(p.timeout_ms) / 1e3, bpf_string(p.comm)};
  // The connection table holds up to 32768 ends: read only where a collective runs.
  const ConnectionTable conns = timeouts.empty() ? ConnectionTable{} : ConnectionTable(connections_.read_connections());
  const uint64_t now = monotonic_ns();
  PeerView peers;
  for (const auto& [pid, t] : timeouts) {
    const LabelList process = process_labels(processes_, pid, t.second);
    const std::vector<ConnectionEnd> ends = conns.ends_of(pid);
    add_sample(risk, process, timeout_risk_ratio(ends, now, t.first));
    peers.add(process, ends, now, top_peers_);
  }
  return {correlated, uncorrelated, risk, peers.stalls, peers.pairs};
}

}  // namespace vigil::agent
