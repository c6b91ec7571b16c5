// matmul on every kernel path and weight type against a float64 reference built from the
// dequantized weights and the quantized activations; batching, threads and adversarial inputs.
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/quants.h"

namespace vigil {
namespace {

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q6_K};

void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Block shapes of the tested types (ggml_types.cpp lives in the model library, not linked here).
int64_t block_size(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: return 1;
    case GgmlType::Q6_K: return 256;
    default: return 32;
  }
}
size_t block_bytes(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return 4;
    case GgmlType::F16: case GgmlType::BF16: return 2;
    case GgmlType::Q4_0: return 18;
    case GgmlType::Q4_1: return 20;
    case GgmlType::Q8_0: return 34;
    default: return 210;
  }
}
size_t row_bytes(GgmlType type, int64_t cols) {
  return static_cast<size_t>(cols / block_size(type)) * block_bytes(type);
}
const char* type_name(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::BF16: return "BF16";
    case GgmlType::Q4_0: return "Q4_0";
    case GgmlType::Q4_1: return "Q4_1";
    case GgmlType::Q8_0: return "Q8_0";
    default: return "Q6_K";
  }
}

// Random weights with realistic scales; quant bytes are uniformly random (so Q8_0 includes −128
// and Q6_K scales include −128).
std::vector<uint8_t> random_weights(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> w(row_bytes(type, cols) * static_cast<size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  const size_t n = static_cast<size_t>(rows * cols);
  switch (type) {
    case GgmlType::F32:
      for (size_t i = 0; i < n; ++i) {
        const float v = normal(rng);
        std::memcpy(w.data() + 4 * i, &v, 4);
      }
      break;
    case GgmlType::F16:
      for (size_t i = 0; i < n; ++i) put_u16(w.data() + 2 * i, fp32_to_fp16(normal(rng)));
      break;
    case GgmlType::BF16:
      for (size_t i = 0; i < n; ++i) put_u16(w.data() + 2 * i, fp32_to_bf16(normal(rng)));
      break;
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
    case GgmlType::Q4_1: {
      const size_t bytes = type == GgmlType::Q4_0 ? 18 : type == GgmlType::Q8_0 ? 34 : 20;
      for (size_t at = 0; at < w.size(); at += bytes) {
        put_u16(w.data() + at, fp32_to_fp16(scale(rng)));
        if (type == GgmlType::Q4_1) put_u16(w.data() + at + 2, fp32_to_fp16(-8.0f * scale(rng)));
      }
      break;
    }
    case GgmlType::Q6_K:
      for (size_t at = 0; at < w.size(); at += sizeof(BlockQ6K)) {
        put_u16(w.data() + at + offsetof(BlockQ6K, d), fp32_to_fp16(scale(rng) * 0.01f));
      }
      break;
    default: break;
  }
  return w;
}

// The activations exactly as the kernels see them, as doubles; for Q4_1 also the per-block s.
struct RefActivations {
  std::vector<double> x;
  std::vector<double> s;
};

RefActivations reference_activations(GgmlType type, const float* x, int64_t cols) {
  RefActivations r;
  r.x.resize(static_cast<size_t>(cols));
  const size_t nb32 = static_cast<size_t>(cols / 32);
  std::vector<int8_t> qs(static_cast<size_t>(cols));
  std::vector<float> d(nb32 + 1), s(nb32 + 1);
  std::vector<int16_t> bsums(static_cast<size_t>(cols / 16) + 1);
  auto from_q = [&](int64_t block) {
    for (int64_t c = 0; c < cols; ++c) {
      r.x[static_cast<size_t>(c)] = static_cast<double>(d[static_cast<size_t>(c / block)]) * qs[static_cast<size_t>(c)];
    }
  };
  switch (type) {
    case GgmlType::F32:
      for (int64_t c = 0; c < cols; ++c) r.x[static_cast<size_t>(c)] = x[c];
      break;
    case GgmlType::F16:
      for (int64_t c = 0; c < cols; ++c) r.x[static_cast<size_t>(c)] = fp16_to_fp32(fp32_to_fp16(x[c]));
      break;
    case GgmlType::BF16:
      for (int64_t c = 0; c < cols; ++c) r.x[static_cast<size_t>(c)] = bf16_to_fp32(fp32_to_bf16(x[c]));
      break;
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
      quantize_row_q8_0_ref(x, cols, qs.data(), d.data());
      from_q(32);
      break;
    case GgmlType::Q4_1:
      quantize_row_q8_1_ref(x, cols, qs.data(), d.data(), s.data());
      from_q(32);
      r.s.assign(s.begin(), s.begin() + static_cast<long>(nb32));
      break;
    case GgmlType::Q6_K:
      quantize_row_q8_K_ref(x, cols, qs.data(), d.data(), bsums.data());
      from_q(256);
      break;
    default: break;
  }
  return r;
}

// Reference y and Σ|terms| (the scale of the rounding error a float kernel may make).
void reference_matmul(GgmlType type, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                      const std::vector<float>& x, int64_t n_tokens, std::vector<double>& y,
                      std::vector<double>& magnitude) {
  y.assign(static_cast<size_t>(rows * n_tokens), 0.0);
  magnitude = y;
  const size_t rb = row_bytes(type, cols);
  std::vector<float> wrow(static_cast<size_t>(cols));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const RefActivations a = reference_activations(type, x.data() + t * cols, cols);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = w.data() + static_cast<size_t>(r) * rb;
      dequantize_row(type, row, cols, wrow.data());
      double sum = 0.0, mag = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        double wc = wrow[static_cast<size_t>(c)];
        if (type == GgmlType::Q4_1) {  // ggml splits Q4_1 into d·n·x + m·s (s carries its own rounding)
          const uint8_t* blk = row + static_cast<size_t>(c / 32) * 20;
          const int j = static_cast<int>(c % 32);
          const int n = j < 16 ? (blk[4 + j] & 0xf) : (blk[4 + j - 16] >> 4);
          wc = static_cast<double>(fp16_to_fp32(load_u16(blk))) * n;
        }
        sum += wc * a.x[static_cast<size_t>(c)];
        mag += std::fabs(wc * a.x[static_cast<size_t>(c)]);
      }
      if (type == GgmlType::Q4_1) {
        for (int64_t b = 0; b < cols / 32; ++b) {
          const double m = fp16_to_fp32(load_u16(row + static_cast<size_t>(b) * 20 + 2));
          sum += m * a.s[static_cast<size_t>(b)];
          mag += std::fabs(m * a.s[static_cast<size_t>(b)]);
        }
      }
      y[static_cast<size_t>(t * rows + r)] = sum;
      magnitude[static_cast<size_t>(t * rows + r)] = mag;
    }
  }
}

std::vector<float> random_activations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

std::vector<float> run_matmul(GgmlType type, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                              const float* x, int64_t n_tokens, ThreadPool& pool, MatmulScratch& scratch) {
  std::vector<float> y(static_cast<size_t>(rows * n_tokens), -12345.0f);
  matmul(WeightView{type, w.data(), rows, cols}, x, n_tokens, y.data(), pool, scratch);
  return y;
}

// Restores the automatic path after a test that switched it.
class MatmulTest : public ::testing::Test {
 protected:
  void TearDown() override { select_cpu_kernel_path(""); }
};

struct Shape {
  int64_t rows, cols, n_tokens;
};

TEST_F(MatmulTest, EveryPathAndTypeMatchesFloat64Reference) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::mt19937 rng(1234);
  for (GgmlType type : kTypes) {
    const int64_t bs = block_size(type) == 1 ? 1 : block_size(type);
    std::vector<Shape> shapes;
    if (bs == 1) shapes = {{1, 1, 1}, {5, 7, 3}, {13, 33, 5}, {67, 576, 33}, {4, 1536, 2}};
    else if (bs == 32) shapes = {{1, 32, 1}, {5, 64, 3}, {13, 96, 7}, {67, 576, 33}, {9, 1536, 17}};
    else shapes = {{1, 256, 1}, {5, 512, 3}, {13, 256, 33}};
    for (const Shape& sh : shapes) {
      const auto w = random_weights(type, sh.rows, sh.cols, rng);
      const auto x = random_activations(sh.cols * sh.n_tokens, rng);
      std::vector<double> want, magnitude;
      reference_matmul(type, w, sh.rows, sh.cols, x, sh.n_tokens, want, magnitude);
      for (std::string_view path : available_cpu_kernel_paths()) {
        select_cpu_kernel_path(path);
        const auto got = run_matmul(type, w, sh.rows, sh.cols, x.data(), sh.n_tokens, pool, scratch);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 2e-5 * magnitude[i] + 1e-30)
              << path << " " << type_name(type) << " rows=" << sh.rows << " cols=" << sh.cols
              << " tokens=" << sh.n_tokens << " at t=" << i / static_cast<size_t>(sh.rows)
              << " r=" << i % static_cast<size_t>(sh.rows);
        }
      }
    }
  }
}

// A token's result must not depend on which other tokens share its batch, nor on the thread
// count: the continuous batcher mixes sequences freely. The decode (≤ 2 tokens) and batched
// kernels sum in the same order, so this holds bit for bit.
TEST_F(MatmulTest, BatchCompositionAndThreadsDoNotChangeResults) {
  ThreadPool one(1), two(2);
  MatmulScratch scratch;
  std::mt19937 rng(99);
  for (std::string_view path : available_cpu_kernel_paths()) {
    select_cpu_kernel_path(path);
    for (GgmlType type : kTypes) {
      const int64_t rows = 19, cols = block_size(type) == 256 ? 512 : 128;
      const auto w = random_weights(type, rows, cols, rng);
      for (int64_t n_tokens : {2, 4, 9, 33, 70}) {
        const auto x = random_activations(cols * n_tokens, rng);
        const auto batched = run_matmul(type, w, rows, cols, x.data(), n_tokens, two, scratch);
        const auto single_thread = run_matmul(type, w, rows, cols, x.data(), n_tokens, one, scratch);
        EXPECT_EQ(batched, single_thread) << path << " " << type_name(type) << " n=" << n_tokens;
        for (int64_t t = 0; t < n_tokens; ++t) {
          const auto alone = run_matmul(type, w, rows, cols, x.data() + t * cols, 1, two, scratch);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(batched[static_cast<size_t>(t * rows + r)], alone[static_cast<size_t>(r)])
                << path << " " << type_name(type) << " n=" << n_tokens << " t=" << t << " r=" << r;
          }
        }
      }
    }
  }
}

// Every path gives the same bits for the quantized types (each emulates ggml's x86 arithmetic),
// so VIGIL_KERNEL_PATH never changes what the model generates.
TEST_F(MatmulTest, AllPathsAgreeBitForBitOnQuantizedTypes) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::mt19937 rng(21);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0}) {
    const int64_t rows = 23, cols = 576;
    const auto w = random_weights(type, rows, cols, rng);
    for (int64_t n_tokens : {1, 7}) {
      const auto x = random_activations(cols * n_tokens, rng);
      select_cpu_kernel_path("scalar");
      const auto want = run_matmul(type, w, rows, cols, x.data(), n_tokens, pool, scratch);
      for (std::string_view path : available_cpu_kernel_paths()) {
        select_cpu_kernel_path(path);
        EXPECT_EQ(run_matmul(type, w, rows, cols, x.data(), n_tokens, pool, scratch), want)
            << path << " " << type_name(type) << " n=" << n_tokens;
      }
    }
  }
}

// The integer paths must never overflow or saturate: extreme weights × extreme activations give
// the exact product.
TEST_F(MatmulTest, ExtremeQuantsAreExact) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  const int64_t cols = 64;
  std::vector<float> x(cols, 5.0f);  // quantizes to +127 everywhere, d = fp16(5/127)
  for (int64_t c = 1; c < cols; c += 2) x[static_cast<size_t>(c)] = -5.0f;
  const double dx = fp16_to_fp32(fp32_to_fp16(5.0f / 127.0f));

  std::vector<uint8_t> q8(2 * 34);  // Q8_0 weights all −128: |w| = 128 is the u8 edge
  for (int b = 0; b < 2; ++b) {
    put_u16(q8.data() + 34 * b, fp32_to_fp16(1.0f));
    for (int j = 0; j < 32; ++j) q8[static_cast<size_t>(34 * b + 2 + j)] = static_cast<uint8_t>(j % 2 ? 0x80 : 0x7f);
  }
  // Σ over 64: even elements 127·127, odd ones (−128)·(−127).
  const double q8_want = dx * 32.0 * (127.0 * 127.0 + 128.0 * 127.0);

  std::vector<uint8_t> q4(2 * 18);  // Q4_0 nibbles 15 (+7) on even elements, 0 (−8) on odd
  for (int b = 0; b < 2; ++b) {
    put_u16(q4.data() + 18 * b, fp32_to_fp16(1.0f));
    for (int j = 0; j < 16; ++j) q4[static_cast<size_t>(18 * b + 2 + j)] = j % 2 ? 0x00 : 0xff;
  }
  const double q4_want = dx * 32.0 * (7.0 * 127.0 + 8.0 * 127.0);

  for (std::string_view path : available_cpu_kernel_paths()) {
    select_cpu_kernel_path(path);
    float y = 0.0f;
    matmul(WeightView{GgmlType::Q8_0, q8.data(), 1, cols}, x.data(), 1, &y, pool, scratch);
    EXPECT_NEAR(y, q8_want, 1e-6 * q8_want) << path;
    matmul(WeightView{GgmlType::Q4_0, q4.data(), 1, cols}, x.data(), 1, &y, pool, scratch);
    EXPECT_NEAR(y, q4_want, 1e-6 * q4_want) << path;
  }
}

// NaN or Inf in a token makes every output of that token NaN for the quantized types (defined in
// quants.h) and leaves the other tokens of the batch untouched.
TEST_F(MatmulTest, NonFiniteActivationsPoisonOnlyTheirToken) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::mt19937 rng(5);
  const float poison[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  for (std::string_view path : available_cpu_kernel_paths()) {
    select_cpu_kernel_path(path);
    for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q6_K}) {
      const int64_t rows = 7, cols = 256, n_tokens = 5;
      const auto w = random_weights(type, rows, cols, rng);
      for (float bad : poison) {
        auto x = random_activations(cols * n_tokens, rng);
        const auto clean = run_matmul(type, w, rows, cols, x.data(), n_tokens, pool, scratch);
        x[static_cast<size_t>(2 * cols + 100)] = bad;  // token 2
        const auto got = run_matmul(type, w, rows, cols, x.data(), n_tokens, pool, scratch);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const size_t i = static_cast<size_t>(t * rows + r);
            if (t == 2) EXPECT_TRUE(std::isnan(got[i])) << path << " " << type_name(type);
            else EXPECT_EQ(got[i], clean[i]) << path << " " << type_name(type);
          }
        }
      }
    }
  }
}

TEST_F(MatmulTest, TinyAndHugeActivationsStayDefined) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::mt19937 rng(8);
  const int64_t rows = 6, cols = 256;
  for (std::string_view path : available_cpu_kernel_paths()) {
    select_cpu_kernel_path(path);
    for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q6_K}) {
      const auto w = random_weights(type, rows, cols, rng);
      std::vector<float> x(cols, std::numeric_limits<float>::denorm_min());
      for (size_t c = 0; c < x.size(); c += 3) x[c] = -x[c];
      const auto tiny = run_matmul(type, w, rows, cols, x.data(), 1, pool, scratch);
      for (float v : tiny) EXPECT_EQ(v, 0.0f) << path << " " << type_name(type);
      // A single outlier: the rest of its block quantizes to 0, the outlier to ±127.
      std::fill(x.begin(), x.end(), 1e-3f);
      x[17] = 1e4f;
      const auto outlier = run_matmul(type, w, rows, cols, x.data(), 1, pool, scratch);
      std::vector<double> want, magnitude;
      reference_matmul(type, w, rows, cols, x, 1, want, magnitude);
      for (size_t i = 0; i < outlier.size(); ++i) {
        EXPECT_NEAR(outlier[i], want[i], 2e-5 * magnitude[i]) << path << " " << type_name(type);
      }
    }
  }
}

TEST_F(MatmulTest, BadArgumentsThrowClearErrors) {
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<uint8_t> w(64);
  std::vector<float> x(64), y(4);
  EXPECT_THROW(matmul(WeightView{GgmlType::Q5_0, w.data(), 1, 32}, x.data(), 1, y.data(), pool, scratch),
               std::invalid_argument);
  EXPECT_THROW(matmul(WeightView{GgmlType::Q4_1, w.data(), 1, 48}, x.data(), 1, y.data(), pool, scratch),
               std::invalid_argument);
  EXPECT_THROW(select_cpu_kernel_path("avx9000"), std::runtime_error);
  matmul(WeightView{GgmlType::Q4_1, w.data(), 1, 32}, x.data(), 0, y.data(), pool, scratch);  // no tokens: no-op
}

TEST_F(MatmulTest, PathSelection) {
  const auto paths = available_cpu_kernel_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.back(), "scalar");
  for (std::string_view p : paths) {
    select_cpu_kernel_path(p);
    EXPECT_EQ(cpu_kernel_path(), p);
  }
  select_cpu_kernel_path("");
  EXPECT_EQ(cpu_kernel_path(), paths.front());
  if (paths.front() != "avx512-vnni") {
    EXPECT_THROW(select_cpu_kernel_path("avx512-vnni"), std::runtime_error);
  }
}

TEST(MatmulScratch, GrowsButNeverShrinks) {
  MatmulScratch scratch;
  uint8_t* big = scratch.reserve(4096);
  EXPECT_EQ(scratch.reserve(100), big);
  EXPECT_EQ(scratch.reserve(4096), big);
}

}  // namespace
}  // namespace vigil
