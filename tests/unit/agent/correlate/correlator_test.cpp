// The correlation decision and the risk ratio against hand-computed cases: RTO backoff inside,
// before, after and across the window; lone retransmits that are not backoff; backoff against
// timeouts; both ends of a connection (a rank that only receives is stalled by its peer's backoff).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/types.h>
#include <prometheus/metric_family.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "correlate/correlator.h"
#include "collective_events.h"
#include "tcp_events.h"
#include "../collectors/rendered_families.h"
#include "../probes/fake_nccl_reader.h"

namespace vigil::agent {
namespace {

constexpr uint64_t kS = 1'000'000'000ULL;

// The state tcp.bpf.c leaves at a retransmit: stall_start_ns is set only inside a run of timeouts.
tcp_timer_state state(uint64_t ts_ns, uint64_t stall_start_ns, uint64_t rto_us) {
  tcp_timer_state s{};
  s.ts_ns = ts_ns;
  s.stall_start_ns = stall_start_ns;
  s.rto_us = rto_us;
  s.retransmits = stall_start_ns ? 3 : 0;
  return s;
}

TEST(Correlation, BackoffInsideTheWindow) {
  EXPECT_TRUE(tcp_backoff_in_window(state(105 * kS, 103 * kS, 800000), 100 * kS, 110 * kS));
  EXPECT_TRUE(tcp_backoff_in_window(state(100 * kS, 100 * kS, 200000), 100 * kS, 110 * kS));  // edges count
  EXPECT_TRUE(tcp_backoff_in_window(state(110 * kS, 110 * kS, 200000), 100 * kS, 110 * kS));
}

TEST(Correlation, LoneRetransmitsAreNotBackoff) {
  // A tail-loss probe or fast retransmit inside the window: repaired in a round trip.
  EXPECT_FALSE(tcp_backoff_in_window(state(105 * kS, 0, 200000), 100 * kS, 110 * kS));
  EXPECT_FALSE(tcp_backoff_in_window(state(0, 0, 0), 100 * kS, 110 * kS));
}

TEST(Correlation, BackoffOutsideTheWindowIsUncorrelated) {
  EXPECT_FALSE(tcp_backoff_in_window(state(99 * kS, 97 * kS, 800000), 100 * kS, 110 * kS));
  // A new run of timeouts that began after the failure says nothing about it.
  EXPECT_FALSE(tcp_backoff_in_window(state(112 * kS, 111 * kS, 200000), 100 * kS, 110 * kS));
}

TEST(Correlation, StallSpanningTheFailureIsCorrelated) {
  // Timeouts since 95 s, the latest retransmit at 113 s (after the failure at 110 s was read).
  EXPECT_TRUE(tcp_backoff_in_window(state(113 * kS, 95 * kS, 3200000), 100 * kS, 110 * kS));
}

TEST(RiskRatio, StallPlusNextRetransmitOverTimeout) {
  // Stall since 100 s, latest retransmit at 102.8 s with RTO 1.6 s; at 103 s: (3 + 3.2) / 8.
  const tcp_timer_state s = state(102'800'000'000ULL, 100 * kS, 1600000);
  EXPECT_NEAR(timeout_risk_ratio(s, 103 * kS, 8.0), (3.0 + 3.2) / 8.0, 1e-9);
  EXPECT_NEAR(timeout_risk_ratio(s, 103 * kS, 600.0), 6.2 / 600.0, 1e-9);
}

TEST(RiskRatio, ZeroWithoutAStall) {
  EXPECT_EQ(timeout_risk_ratio(state(0, 0, 0), 103 * kS, 8.0), 0.0);
  EXPECT_EQ(timeout_risk_ratio(state(102 * kS, 0, 200000), 103 * kS, 8.0), 0.0);  // a lone retransmit
  // A run of timeouts that ended long ago (no retransmit within the next RTO and a half).
  EXPECT_EQ(timeout_risk_ratio(state(50 * kS, 49 * kS, 200000), 103 * kS, 8.0), 0.0);
}

// The end of 10.0.0.<self>:<sport> -> 10.0.0.<peer>:<dport>.
tcp_conn_key end(int self, uint16_t sport, int peer, uint16_t dport) {
  tcp_conn_key k{};
  k.family = AF_INET;
  k.sport = sport;
  k.dport = dport;
  k.saddr[0] = k.daddr[0] = 10;
  k.saddr[3] = static_cast<uint8_t>(self);
  k.daddr[3] = static_cast<uint8_t>(peer);
  return k;
}

tcp_conn_state owned(uint32_t tgid, const tcp_timer_state& timer) {
  tcp_conn_state s{};
  s.tgid = tgid;
  s.timer = timer;
  return s;
}

TEST(ConnectionCorrelation, AReceiverIsStalledByItsPeersBackoff) {
  // Rank 0 (pid 100) only receives: its end never retransmits; rank 1 (pid 200) sends into a
  // blackhole and backs off on the other end of the same connection.
  ConnectionTable t;
  t.add(end(1, 40000, 2, 29500), owned(100, state(0, 0, 0)));
  t.add(end(2, 29500, 1, 40000), owned(200, state(105 * kS, 103 * kS, 800000)));
  const auto ends = t.ends_of(100);
  ASSERT_EQ(ends.size(), 2u);
  const ConnectionEnd* stalled = backoff_in_window(ends, 100 * kS, 110 * kS);
  ASSERT_NE(stalled, nullptr);
  EXPECT_FALSE(stalled->own);
  EXPECT_EQ(stalled->state.tgid, 200u);
  // The risk is the worst end's, here the peer's: at 106 s its run of timeouts (since 103 s, latest
  // retransmit 1 s ago, within 2 x 0.8 s + 1 s) has stalled 3 s, and the next retransmit waits
  // 2 x 0.8 s: (3 + 1.6) / 8. The receiver's own end, never retransmitting, gives 0.
  EXPECT_NEAR(timeout_risk_ratio(ends, 106 * kS, 8.0), (3.0 + 1.6) / 8.0, 1e-9);
  // The sender is stalled by its own end.
  ASSERT_NE(backoff_in_window(t.ends_of(200), 100 * kS, 110 * kS), nullptr);
  EXPECT_TRUE(backoff_in_window(t.ends_of(200), 100 * kS, 110 * kS)->own);
}

TEST(ConnectionCorrelation, OtherConnectionsDoNotCount) {
  ConnectionTable t;
  // pid 100's connection is healthy at both ends; a connection between two other processes (pid
  // 300 and 400) on another port of the same hosts backs off.
  t.add(end(1, 40000, 2, 29500), owned(100, state(0, 0, 0)));
  t.add(end(2, 29500, 1, 40000), owned(200, state(0, 0, 0)));
  t.add(end(1, 40001, 2, 8080), owned(300, state(105 * kS, 103 * kS, 800000)));
  t.add(end(2, 8080, 1, 40001), owned(400, state(0, 0, 0)));
  EXPECT_EQ(backoff_in_window(t.ends_of(100), 100 * kS, 110 * kS), nullptr);
  EXPECT_EQ(timeout_risk_ratio(t.ends_of(100), 106 * kS, 8.0), 0.0);
  EXPECT_NE(backoff_in_window(t.ends_of(400), 100 * kS, 110 * kS), nullptr);
  // An end whose owner is not known yet belongs to no process.
  EXPECT_TRUE(t.ends_of(0).empty());
}

TEST(ConnectionCorrelation, AnEndWithoutAPeerOnThisNode) {
  ConnectionTable t;
  t.add(end(1, 40000, 9, 29500), owned(100, state(0, 0, 0)));
  EXPECT_EQ(t.ends_of(100).size(), 1u);
  EXPECT_EQ(backoff_in_window(t.ends_of(100), 100 * kS, 110 * kS), nullptr);
}

TEST(ConnectionCorrelation, RiskIsTheWorstEnd) {
  ConnectionTable t;
  t.add(end(1, 40000, 2, 29500), owned(100, state(102'800'000'000ULL, 100 * kS, 1600000)));
  t.add(end(2, 29500, 1, 40000), owned(200, state(102'900'000'000ULL, 101 * kS, 200000)));
  EXPECT_NEAR(timeout_risk_ratio(t.ends_of(200), 103 * kS, 8.0), (3.0 + 3.2) / 8.0, 1e-9);
}

// The Correlator on hand-made snapshots of the TCP, NCCL and collective maps (the clock is the
// real CLOCK_MONOTONIC: the correlator decides against "now").
using namespace std::chrono_literals;

class FakeConnections : public TcpConnectionReader {
 public:
  TcpConnectionEnds read_connections() const override { return ends; }
  TcpConnectionEnds ends;
};

using test::FakeNccl;

class FakeCollective : public CollectiveReader {
 public:
  CollectiveSnapshot read() const override { return snapshot; }
  CollectiveSnapshot snapshot;
};

template <typename Proc>
Proc named(const char* comm) {
  Proc p{};
  std::strncpy(p.comm, comm, sizeof p.comm - 1);
  return p;
}

class CorrelatorTest : public ::testing::Test {
 protected:
  // No /proc of these pids: labels fall back to the kernel's comm.
  ProcessTable processes_{std::filesystem::temp_directory_path().string() + "/vigil-no-proc", 30ms};
  FakeConnections conns_;
  FakeNccl nccl_;
  FakeCollective collective_;
  const uint64_t now_ = monotonic_ns();
};

TEST_F(CorrelatorTest, NcclAbortsAndErrorsAreDecidedOnceAgainstTheConnections) {
  // pid 100's connection backs off now at the peer's end; pid 300 has a healthy one.
  conns_.ends = {{end(1, 40000, 2, 29500), owned(100, state(0, 0, 0))},
                 {end(2, 29500, 1, 40000), owned(200, state(now_ - kS / 2, now_ - 3 * kS, 800000))},
                 {end(1, 40001, 3, 29500), owned(300, state(0, 0, 0))}};
  nccl_proc stalled = named<nccl_proc>("trainer"), healthy = named<nccl_proc>("other");
  stalled.aborts = 1;
  healthy.aborts = 2;
  nccl_.snapshot.procs = {{100, stalled}, {300, healthy}};
  nccl_.snapshot.async = {{{100, 6}, 1}};
  Correlator c(conns_, &nccl_, nullptr, 8s, 4, processes_);
  c.poll_nccl();
  c.poll_nccl();  // nothing new: nothing counted twice
  const auto fs = c.Collect();
  std::map<std::string, std::pair<double, double>> by;  // pid/kind -> {correlated, uncorrelated}
  for (const auto& m : family(fs, "nccl_tcp_correlated_timeouts_total").metric)
    by[label(m, "pid") + "/" + label(m, "kind")].first = m.counter.value;
  for (const auto& m : family(fs, "nccl_tcp_uncorrelated_timeouts_total").metric)
    by[label(m, "pid") + "/" + label(m, "kind")].second = m.counter.value;
  using P = std::pair<double, double>;
  EXPECT_EQ(by, (std::map<std::string, P>{{"100/abort", P{1, 0}}, {"100/error", P{1, 0}}, {"300/abort", P{0, 2}}}));
  // NCCL processes get the configured timeout: pid 100's risk from the peer's stall, pid 300 none.
  std::map<std::string, double> risk;
  for (const auto& m : family(fs, "nccl_tcp_timeout_risk_ratio").metric) risk[label(m, "pid")] = m.gauge.value;
  ASSERT_EQ(risk.size(), 2u);
  EXPECT_GT(risk["100"], 0.3);
  EXPECT_EQ(risk["300"], 0.0);
}

TEST_F(CorrelatorTest, WorkersAnnounceTheirTimeoutAndExpiredProcessesAreDropped) {
  conns_.ends = {{end(1, 40000, 2, 29500), owned(100, state(now_ - kS / 2, now_ - 3 * kS, 800000))}};
  collective_proc worker = named<collective_proc>("vigil-worker"), quiet = named<collective_proc>("idle");
  worker.timeout_ms = 4000;
  collective_.snapshot.procs = {{100, worker}, {101, quiet}};  // 101: no collective begun, no timeout
  Correlator c(conns_, nullptr, &collective_, 8s, 4, processes_);
  collective_failure f{};
  f.tgid = 100;
  f.status = 1;
  f.ts_ns = now_;
  f.elapsed_ns = 4 * kS;
  f.timeout_ms = 4000;
  std::strncpy(f.comm, "vigil-worker", sizeof f.comm - 1);
  c.on_collective_failure(f);
  auto fs = c.Collect();
  ASSERT_EQ(family(fs, "nccl_tcp_correlated_timeouts_total").metric.size(), 1u);
  EXPECT_EQ(label(family(fs, "nccl_tcp_correlated_timeouts_total").metric[0], "source"), "worker");
  EXPECT_EQ(family(fs, "nccl_tcp_correlated_timeouts_total").metric[0].counter.value, 1);
  const auto& risk = family(fs, "nccl_tcp_timeout_risk_ratio").metric;
  ASSERT_EQ(risk.size(), 1u);  // the worker's own timeout (4 s), not the idle process
  EXPECT_EQ(label(risk[0], "pid"), "100");
  EXPECT_GT(risk[0].gauge.value, 0.6);

  // Not in /proc at all: expired once the grace has passed since first seen.
  processes_.expired(100);
  std::this_thread::sleep_for(40ms);
  c.expire();
  EXPECT_TRUE(family(c.Collect(), "nccl_tcp_correlated_timeouts_total").metric.empty());
}

}  // namespace
}  // namespace vigil::agent
