// The correlation decision and the risk ratio against hand-computed cases: a retransmit inside,
// before and after the window; a run of timeouts spanning the window; RTO backoff against timeouts.
#include <gtest/gtest.h>
#include <linux/types.h>

#include "correlate/correlator.h"
#include "tcp.h"

namespace vigil::agent {
namespace {

constexpr uint64_t kS = 1'000'000'000ULL;

tcp_proc_state state(uint64_t ts_ns, uint64_t stall_start_ns, uint64_t rto_us) {
  tcp_proc_state s{};
  s.ts_ns = ts_ns;
  s.stall_start_ns = stall_start_ns;
  s.rto_us = rto_us;
  s.retransmits = stall_start_ns ? 3 : 0;
  return s;
}

TEST(Correlation, RetransmitInsideTheWindow) {
  EXPECT_TRUE(tcp_trouble_in_window(state(105 * kS, 0, 200000), 100 * kS, 110 * kS));
  EXPECT_TRUE(tcp_trouble_in_window(state(100 * kS, 0, 200000), 100 * kS, 110 * kS));  // edges count
  EXPECT_TRUE(tcp_trouble_in_window(state(110 * kS, 0, 200000), 100 * kS, 110 * kS));
}

TEST(Correlation, NoRetransmitOrOnlyOutsideIsUncorrelated) {
  EXPECT_FALSE(tcp_trouble_in_window(state(0, 0, 0), 100 * kS, 110 * kS));
  EXPECT_FALSE(tcp_trouble_in_window(state(99 * kS, 0, 200000), 100 * kS, 110 * kS));
  // A new run of timeouts that began after the failure says nothing about it.
  EXPECT_FALSE(tcp_trouble_in_window(state(112 * kS, 111 * kS, 200000), 100 * kS, 110 * kS));
}

TEST(Correlation, StallSpanningTheFailureIsCorrelated) {
  // Timeouts since 95 s, the latest retransmit at 113 s (after the failure at 110 s was read).
  EXPECT_TRUE(tcp_trouble_in_window(state(113 * kS, 95 * kS, 3200000), 100 * kS, 110 * kS));
}

TEST(RiskRatio, StallPlusNextRetransmitOverTimeout) {
  // Stall since 100 s, latest retransmit at 102.8 s with RTO 1.6 s; at 103 s: (3 + 3.2) / 8.
  const tcp_proc_state s = state(102'800'000'000ULL, 100 * kS, 1600000);
  EXPECT_NEAR(timeout_risk_ratio(s, 103 * kS, 8.0), (3.0 + 3.2) / 8.0, 1e-9);
  EXPECT_NEAR(timeout_risk_ratio(s, 103 * kS, 600.0), 6.2 / 600.0, 1e-9);
}

TEST(RiskRatio, ZeroWithoutAStall) {
  EXPECT_EQ(timeout_risk_ratio(state(0, 0, 0), 103 * kS, 8.0), 0.0);
  // A single loss repaired long ago (no retransmit within the next RTO and a half): no stall.
  EXPECT_EQ(timeout_risk_ratio(state(50 * kS, 50 * kS, 200000), 103 * kS, 8.0), 0.0);
}

}  // namespace
}  // namespace vigil::agent
