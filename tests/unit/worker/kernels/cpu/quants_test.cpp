// Block layouts, dequantization, and the activation quantizers (rounding, saturation, NaN/Inf,
// tiny and huge blocks) on every kernel path, bit-identical to the reference.
#include "kernels/cpu/quants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_kernels.h"

namespace vigil {
namespace {

void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

TEST(Dequantize, Q4_0LowNibblesFirstThenHighOffsetBy8) {
  uint8_t blk[18];
  put_u16(blk, fp32_to_fp16(0.5f));
  for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  dequantize_row(GgmlType::Q4_0, blk, 32, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * static_cast<float>(j - 8));
    EXPECT_EQ(out[j + 16], 0.5f * static_cast<float>(15 - j - 8));
  }
}

TEST(Dequantize, Q4_1ScaleAndMin) {
  uint8_t blk[20];
  put_u16(blk, fp32_to_fp16(0.25f));
  put_u16(blk + 2, fp32_to_fp16(-1.0f));
  for (int j = 0; j < 16; ++j) blk[4 + j] = static_cast<uint8_t>(j | (3 << 4));
  float out[32];
  dequantize_row(GgmlType::Q4_1, blk, 32, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.25f * static_cast<float>(j) - 1.0f);
    EXPECT_EQ(out[j + 16], 0.25f * 3.0f - 1.0f);
  }
}

TEST(Dequantize, Q8_0AndFloatTypes) {
  uint8_t blk[34];
  put_u16(blk, fp32_to_fp16(2.0f));
  for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  float out[32];
  dequantize_row(GgmlType::Q8_0, blk, 32, out);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 2.0f * static_cast<float>(j * 8 - 128));

  uint8_t halves[4];
  put_u16(halves, fp32_to_fp16(1.5f));
  put_u16(halves + 2, fp32_to_bf16(-3.0f));
  dequantize_row(GgmlType::F16, halves, 1, out);
  EXPECT_EQ(out[0], 1.5f);
  dequantize_row(GgmlType::BF16, halves + 2, 1, out);
  EXPECT_EQ(out[0], -3.0f);
}

TEST(Dequantize, Q6_KLayout) {
  // q6 = element index mod 64 for every element; scales alternate 1 and −2.
  std::vector<uint8_t> blk(sizeof(BlockQ6K), 0);
  uint8_t* ql = blk.data() + offsetof(BlockQ6K, ql);
  uint8_t* qh = blk.data() + offsetof(BlockQ6K, qh);
  auto* sc = reinterpret_cast<int8_t*>(blk.data() + offsetof(BlockQ6K, scales));
  for (int g = 0; g < 16; ++g) sc[g] = static_cast<int8_t>(g % 2 ? -2 : 1);
  put_u16(blk.data() + offsetof(BlockQ6K, d), fp32_to_fp16(0.125f));
  for (int e = 0; e < 256; ++e) {
    const int q = e % 64, half = e / 128, run = (e % 128) / 32, l = e % 32;
    const int ql_byte = 64 * half + l + (run % 2) * 32;
    ql[ql_byte] = static_cast<uint8_t>(ql[ql_byte] | ((q & 0xf) << (run >= 2 ? 4 : 0)));
    qh[32 * half + l] = static_cast<uint8_t>(qh[32 * half + l] | ((q >> 4) << (2 * run)));
  }
  float out[256];
  dequantize_row(GgmlType::Q6_K, blk.data(), 256, out);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(out[e], 0.125f * static_cast<float>(sc[e / 16]) * static_cast<float>(e % 64 - 32)) << e;
  }
}

TEST(Dequantize, UnsupportedTypeThrows) {
  uint8_t blk[22] = {};
  float out[32];
  EXPECT_THROW(dequantize_row(GgmlType::Q5_0, blk, 32, out), std::invalid_argument);
}

// --- activation quantizers ---

struct Q8Result {
  std::vector<int8_t> qs;
  std::vector<float> d, s;
};

Q8Result ref_q8_1(const std::vector<float>& x) {
  Q8Result r{std::vector<int8_t>(x.size()), std::vector<float>(x.size() / 32), std::vector<float>(x.size() / 32)};
  quantize_row_q8_1_ref(x.data(), static_cast<int64_t>(x.size()), r.qs.data(), r.d.data(), r.s.data());
  return r;
}

TEST(QuantizeQ8, RoundsToNearestEvenWithAmaxMappedTo127) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // id = 1: x·id is x itself
  x[1] = 2.5f;    // tie → 2
  x[2] = 3.5f;    // tie → 4
  x[3] = -2.5f;   // tie → −2
  x[4] = 0.49f;
  const Q8Result r = ref_q8_1(x);
  EXPECT_EQ(r.qs[0], 127);
  EXPECT_EQ(r.qs[1], 2);
  EXPECT_EQ(r.qs[2], 4);
  EXPECT_EQ(r.qs[3], -2);
  EXPECT_EQ(r.qs[4], 0);
  EXPECT_EQ(r.d[0], fp16_to_fp32(fp32_to_fp16(1.0f)));
  EXPECT_EQ(r.s[0], fp16_to_fp32(fp32_to_fp16(127.0f + 2 + 4 - 2)));
}

TEST(QuantizeQ8, SaturatesAndHandlesAdversarialBlocks) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float denorm = std::numeric_limits<float>::denorm_min();
  std::vector<float> x(32 * 7, 1.0f);
  x[0] = 1e30f;                                                     // block 0: one huge outlier
  for (int j = 32; j < 64; ++j) x[static_cast<size_t>(j)] = -3.0f;  // block 1: all equal
  x[64 + 5] = inf;                                                  // block 2: +Inf
  x[96 + 9] = nan;                                                  // block 3: NaN
  for (int j = 128; j < 160; ++j) x[static_cast<size_t>(j)] = (j % 2 ? 1.0f : -1.0f) * denorm;  // block 4
  x[160] = -inf;                                                    // block 5: −Inf
  for (int j = 192; j < 224; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j % 3 - 1) * 3e38f;  // block 6: near FLT_MAX
  const Q8Result r = ref_q8_1(x);

  EXPECT_EQ(r.qs[0], 127);
  for (int j = 1; j < 32; ++j) EXPECT_EQ(r.qs[static_cast<size_t>(j)], 0);
  for (int j = 32; j < 64; ++j) EXPECT_EQ(r.qs[static_cast<size_t>(j)], -127);
  EXPECT_TRUE(std::isnan(r.d[2]) && std::isnan(r.s[2]));
  EXPECT_TRUE(std::isnan(r.d[3]) && std::isnan(r.s[3]));
  EXPECT_TRUE(std::isnan(r.d[5]));
  for (int j = 64; j < 128; ++j) EXPECT_EQ(r.qs[static_cast<size_t>(j)], 0);
  EXPECT_EQ(r.d[4], 0.0f);  // a denormal block: 127/amax overflows, quants and scale are 0
  for (int j = 128; j < 160; ++j) EXPECT_EQ(r.qs[static_cast<size_t>(j)], 0);
  // Near FLT_MAX: quants saturate cleanly, the fp16 scale overflows to Inf exactly as in ggml.
  for (int j = 192; j < 224; ++j) EXPECT_EQ(r.qs[static_cast<size_t>(j)], (j % 3 - 1) * 127);
  EXPECT_TRUE(std::isinf(r.d[6]));
  for (int8_t q : r.qs) EXPECT_GE(q, -127);
}

TEST(QuantizeQ8K, MirrorsGgmlReference) {
  std::vector<float> x(512);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  x[3] = -10.0f;  // ggml's iscale = −127/max: the largest-magnitude element always gets −127
  x[300] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int8_t> qs(512);
  float d[2];
  int16_t bsums[32];
  quantize_row_q8_K_ref(x.data(), 512, qs.data(), d, bsums);
  EXPECT_EQ(qs[3], -127);
  EXPECT_FLOAT_EQ(d[0], 1.0f / (-127.0f / -10.0f));
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += qs[static_cast<size_t>(16 * g + j)];
    EXPECT_EQ(bsums[g], sum);
  }
  for (int j = 0; j < 256; ++j) EXPECT_NEAR(static_cast<float>(qs[static_cast<size_t>(j)]) * d[0], x[static_cast<size_t>(j)], d[0] * 0.5f + 1e-6f);
  EXPECT_TRUE(std::isnan(d[1]));
  for (int j = 256; j < 512; ++j) EXPECT_EQ(qs[static_cast<size_t>(j)], 0);
}

// Every path's quantizer produces the reference's bits, on random and adversarial inputs.
TEST(QuantizeQ8, EveryPathMatchesTheReferenceBitForBit) {
  const float specials[] = {0.0f, -0.0f, 1e-45f, 1e-38f, 65504.0f * 127.0f, 1e30f, -1e30f,
                            std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(32 * 64);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = dist(rng);
    if (i / 32 % 4 == 1 && i % 7 == 0) x[i] = specials[(i / 7) % std::size(specials)];
    if (i / 32 % 4 == 2) x[i] = static_cast<float>(i % 5);  // many exact ties after scaling
  }
  const Q8Result want = ref_q8_1(x);
  std::vector<float> want_d0(x.size() / 32);
  std::vector<int8_t> want_q0(x.size());
  quantize_row_q8_0_ref(x.data(), static_cast<int64_t>(x.size()), want_q0.data(), want_d0.data());
  // A set is touched only where this CPU has its path: the AVX-512 set's statics are built with
  // AVX-512 instructions (an AVX2-only EPYC died here with SIGILL when the list named all three).
  const auto set_for = [](std::string_view path) -> const kernels::KernelSet* {
    if (path == "scalar") return &kernels::kernels_scalar();
    if (path == "avx2") return &kernels::kernels_avx2();
    if (path == "avx512-vnni") return &kernels::kernels_avx512_vnni();
    return nullptr;
  };
  for (std::string_view path : available_cpu_kernel_paths()) {
    const kernels::KernelSet* set = set_for(path);
    ASSERT_NE(set, nullptr) << path;
    Q8Result got{std::vector<int8_t>(x.size()), std::vector<float>(x.size() / 32), std::vector<float>(x.size() / 32)};
    set->quantize_q8_1(x.data(), static_cast<int64_t>(x.size()), got.qs.data(), got.d.data(), got.s.data(), 1);
    EXPECT_EQ(got.qs, want.qs) << path;
    for (size_t b = 0; b < want.d.size(); ++b) {
      if (std::isnan(want.d[b])) {
        EXPECT_TRUE(std::isnan(got.d[b]) && std::isnan(got.s[b])) << path << " block " << b;
      } else {
        EXPECT_EQ(got.d[b], want.d[b]) << path << " block " << b;
        EXPECT_EQ(got.s[b], want.s[b]) << path << " block " << b;
      }
    }
    std::vector<int8_t> q0(x.size());
    std::vector<float> d0(x.size() / 32);
    set->quantize_q8_0(x.data(), static_cast<int64_t>(x.size()), q0.data(), d0.data());
    EXPECT_EQ(q0, want_q0) << path;
  }
}

}  // namespace
}  // namespace vigil
