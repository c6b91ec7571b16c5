// The correlation decision and the risk ratio against hand-computed cases: RTO backoff inside,
// before, after and across the window; lone retransmits that are not backoff; backoff against
// timeouts.
#include <gtest/gtest.h>
#include <linux/types.h>

#include "correlate/correlator.h"
#include "tcp.h"

namespace vigil::agent {
namespace {

constexpr uint64_t kS = 1'000'000'000ULL;

// The state tcp.bpf.c leaves at a retransmit: stall_start_ns is set only inside a run of timeouts.
tcp_proc_state state(uint64_t ts_ns, uint64_t stall_start_ns, uint64_t rto_us) {
  tcp_proc_state s{};
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
  const tcp_proc_state s = state(102'800'000'000ULL, 100 * kS, 1600000);
  EXPECT_NEAR(timeout_risk_ratio(s, 103 * kS, 8.0), (3.0 + 3.2) / 8.0, 1e-9);
  EXPECT_NEAR(timeout_risk_ratio(s, 103 * kS, 600.0), 6.2 / 600.0, 1e-9);
}

TEST(RiskRatio, ZeroWithoutAStall) {
  EXPECT_EQ(timeout_risk_ratio(state(0, 0, 0), 103 * kS, 8.0), 0.0);
  EXPECT_EQ(timeout_risk_ratio(state(102 * kS, 0, 200000), 103 * kS, 8.0), 0.0);  // a lone retransmit
  // A run of timeouts that ended long ago (no retransmit within the next RTO and a half).
  EXPECT_EQ(timeout_risk_ratio(state(50 * kS, 49 * kS, 200000), 103 * kS, 8.0), 0.0);
}

}  // namespace
}  // namespace vigil::agent
