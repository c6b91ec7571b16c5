// IEEE half and bfloat16 <-> float conversions (round to nearest even), portable and exact.
#pragma once

#include <bit>
#include <cstdint>

namespace vigil {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {
    // Zero or subnormal: value = mant * 2^-24, exact in float.
    float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs >= 0x7F800000u)  // inf stays inf, NaN stays a (quiet) NaN
    return static_cast<uint16_t>(sign | 0x7C00 | (abs > 0x7F800000u ? 0x200 : 0));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00);  // rounds past 65504
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: add 0.5 (as float) so the FPU rounds the mantissa for us.
    float v = std::bit_cast<float>(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(v) - 0x3F000000u));
  }
  const uint32_t odd = (abs >> 13) & 1;
  return static_cast<uint16_t>(sign | ((abs + 0xC8000FFFu + odd) >> 13));
}

inline float bf16_to_fp32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

}  // namespace vigil
