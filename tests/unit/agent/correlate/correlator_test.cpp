// The correlation decision and the risk ratio against hand-computed cases: RTO backoff inside,
// before, after and across the window; lone retransmits that are not backoff; backoff against
// timeouts; both ends of a connection (a rank that only receives is stalled by its peer's backoff).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/types.h>

#include "correlate/correlator.h"
#include "tcp_events.h"

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

}  // namespace
}  // namespace vigil::agent
