// The liveness rule decided with a clock of the test's own: live up to the limit after the loop
// last ran, stalled past it with a reason naming both, live again once a tick completes.
#include "stats/loop_liveness.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;
using Clock = LoopLiveness::Clock;

TEST(LoopLiveness, LiveUntilTheLimitThenStalledUntilATick) {
  Clock::time_point t0{};
  LoopLiveness live(33s, t0);
  EXPECT_EQ(live.stalled(t0 + 10s), "");
  EXPECT_EQ(live.stalled(t0 + 33s), "");
  EXPECT_EQ(live.stalled(t0 + 33s + 1ms).rfind("housekeeping loop stalled", 0), 0u);
  EXPECT_EQ(live.stalled(t0 + 41200ms), "housekeeping loop stalled: no tick completed for 41.2 s (limit 33.0 s)");
  live.ran_at(t0 + 42s);
  EXPECT_EQ(live.stalled(t0 + 43s), "");
  EXPECT_DOUBLE_EQ(live.seconds_since_run(t0 + 43s), 1.0);
  EXPECT_EQ(live.stalled(t0 + 42s + 34s).empty(), false);
}

}  // namespace
}  // namespace vigil::agent
