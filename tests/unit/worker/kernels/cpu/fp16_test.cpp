// fp16/bf16 conversions: every half round-trips, rounding is to nearest even, specials survive.
#include "kernels/cpu/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace vigil {
namespace {

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const float f = fp16_to_fp32(half);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), half) << "half 0x" << std::hex << h;
  }
}

TEST(Fp16, RoundsToNearestEvenAndSaturatesToInfinity) {
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3C00);             // halfway, even stays
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3C02);         // halfway, odd rounds up
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-1e9f), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);                    // halfway to the smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f * 1.5f), 0x0001);
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Bf16, RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_fp32(fp32_to_bf16(1.5f)), 1.5f);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3F80);  // halfway, even
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace vigil
