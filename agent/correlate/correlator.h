// NCCL/TCP correlation: every failed collective (the worker's collective_end with a non-zero
// status; an NCCL process's async error or abort) is checked against the TCP connections the
// process uses, both ends of each where the other end is on this node, and each process's live
// TCP stall on those connections is put against its collective timeout.
// Method and limits: docs/correlation.md.
#pragma once

#include <prometheus/collectable.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <linux/types.h>

#include "discovery/process_table.h"
#include "probes/collective_maps.h"
#include "probes/nccl_maps.h"
#include "probes/tcp_maps.h"
#include "tcp_events.h"

struct collective_failure;

namespace vigil::agent {

// How far before a failed collective began a retransmit still counts: a loss just before the
// call starts the backoff the call then waits out.
inline constexpr uint64_t kCorrelationLookbackNs = 2'000'000'000ULL;

// True when a socket was in RTO backoff during [window_start, end] (CLOCK_MONOTONIC ns): its
// latest run of retransmission timeouts began before `end` and was still retransmitting after
// `window_start`. `tcp` is the socket's latest retransmit state. Lone fast
// retransmits and tail-loss probes (no timeout: icsk_retransmits 0) do not count: they repair a
// loss within a round trip and occur on healthy links (a few per second on our veth pairs under
// load), so they cannot explain a collective that waited seconds.
bool tcp_backoff_in_window(const tcp_timer_state& tcp, uint64_t window_start_ns, uint64_t end_ns);

// (stall so far + wait until the next retransmit, 2 x RTO up to 120 s) / collective timeout: at 1
// the next TCP retry lands after the collective has timed out. 0 when the process is not stalled.
double timeout_risk_ratio(const tcp_timer_state& tcp, uint64_t now_ns, double timeout_seconds);

// One end of a connection whose timer state speaks for a process: the process's own socket, or the
// socket at the other end of a connection the process uses.
struct ConnectionEnd {
  tcp_conn_key key;
  tcp_conn_state state;
  bool own;  // false: the peer's end
};

// The node's TCP connections as tcp.bpf.c records them (map `conns`): each end, its owner and its
// socket's timer state.
class ConnectionTable {
 public:
  explicit ConnectionTable(const TcpConnectionEnds& ends = {});
  void add(const tcp_conn_key& key, const tcp_conn_state& state);
  // Both ends of every connection `pid` owns an end of: its own and, where the other end is on
  // this node (the key with addresses and ports swapped), that one too.
  std::vector<ConnectionEnd> ends_of(uint32_t pid) const;

 private:
  struct KeyLess {  // keys are stored with their padding zeroed, so bytes compare
    bool operator()(const tcp_conn_key& a, const tcp_conn_key& b) const;
  };
  std::map<tcp_conn_key, tcp_conn_state, KeyLess> ends_;
};

// The end in RTO backoff during [window_start, end] on a connection `pid` uses, if any.
const ConnectionEnd* backoff_in_window(const std::vector<ConnectionEnd>& ends, uint64_t window_start_ns,
                                       uint64_t end_ns);
// The highest timeout_risk_ratio over the ends (0 when none is stalled).
double timeout_risk_ratio(const std::vector<ConnectionEnd>& ends, uint64_t now_ns, double timeout_seconds);

class Correlator : public prometheus::Collectable {
 public:
  // `nccl`, `collective`: null when that set is not loaded. Workers announce their collective
  // timeout (`collective`); NCCL processes do not: `nccl_timeout` (config
  // correlation.collective_timeout) stands in for theirs. `top_peers` bounds the per-peer series
  // of a process (PeerView, peer_view.h).
  Correlator(const TcpConnectionReader& connections, const NcclReader* nccl, const CollectiveReader* collective,
             std::chrono::milliseconds nccl_timeout, int top_peers, ProcessTable& processes);

  // A failed worker collective (poll thread).
  void on_collective_failure(const collective_failure& f);
  // New NCCL async errors and aborts since the last call become failures decided now (poll thread).
  void poll_nccl();
  // Drops the state of processes gone longer than the grace period (housekeeping).
  void expire();

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  void record(uint32_t pid, const std::string& comm, const char* source, const char* kind, uint64_t window_start_ns,
              uint64_t end_ns, const std::string& what);

  const TcpConnectionReader& connections_;
  const NcclReader* nccl_;
  const CollectiveReader* collective_;
  std::chrono::milliseconds nccl_timeout_;
  int top_peers_;
  ProcessTable& processes_;

  mutable std::mutex mu_;
  // (pid, source, kind) -> {correlated, uncorrelated}
  std::map<std::tuple<uint32_t, std::string, std::string>, std::pair<uint64_t, uint64_t>> counts_;
  std::map<uint32_t, std::string> comms_;
  // NCCL counters already turned into failures: pid -> {aborts, async errors}
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> nccl_seen_;
};

}  // namespace vigil::agent
