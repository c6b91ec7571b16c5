// VMM address bookkeeping: granularity rounding, first-fit placement, coalescing, misuse.
#include "backend/cuda/va_ranges.h"

#include <gtest/gtest.h>

namespace vigil {
namespace {

constexpr size_t kG = 2 << 20;

TEST(VaRanges, RoundsToGranularityAndPacksFromTheStart) {
  VaRanges va(8 * kG, kG);
  EXPECT_EQ(va.take(1), 0u);
  EXPECT_EQ(va.take(kG + 1), kG);
  EXPECT_EQ(va.used(), 3 * kG);
  EXPECT_EQ(va.high_water(), 3 * kG);
}

TEST(VaRanges, FreedHoleIsReusedFirstAndNeighboursMerge) {
  VaRanges va(4 * kG, kG);
  size_t a = *va.take(kG), b = *va.take(kG), c = *va.take(kG);
  va.give(b, kG);
  EXPECT_EQ(va.take(kG), b);  // the hole, not the tail
  va.give(a, kG);
  va.give(b, kG);  // a and b merge: a 2-granule request fits at 0
  EXPECT_EQ(va.take(2 * kG), 0u);
  va.give(0, 2 * kG);
  va.give(c, kG);
  EXPECT_EQ(va.used(), 0u);
  EXPECT_EQ(va.take(4 * kG), 0u);  // everything merged back into one range
}

TEST(VaRanges, ExhaustionAndMisuse) {
  VaRanges va(2 * kG, kG);
  EXPECT_EQ(va.take(3 * kG), std::nullopt);
  EXPECT_EQ(va.take(0), std::nullopt);
  size_t a = *va.take(kG);
  EXPECT_THROW(va.give(a, 2 * kG), std::invalid_argument);
  EXPECT_THROW(va.give(a + kG, kG), std::invalid_argument);
  EXPECT_THROW(VaRanges(kG + 1, kG), std::invalid_argument);
}

}  // namespace
}  // namespace vigil
