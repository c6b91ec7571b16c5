// Kernel-level parity with llama.cpp: our activation quantizers and matmuls must produce ggml's
// exact bits on every path, checked against the libggml-cpu that scripts/setup_reference.sh builds
// into .venv-ref (x86 build with AVX2 or AVX-512). Skipped where that library is absent.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/quants.h"

namespace vigil {
namespace {

using QuantizeRow = void (*)(const float* x, void* y, int64_t k);
using VecDot = void (*)(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy,
                        size_t by, int nrc);

struct Ggml {
  void* handle = nullptr;
  QuantizeRow quantize_q8_0 = nullptr, quantize_q8_1 = nullptr;
  VecDot dot_q4_1 = nullptr, dot_q8_0 = nullptr, dot_q4_0 = nullptr;
};

const Ggml& ggml() {
  static const Ggml g = [] {
    Ggml r;
    const char* env = std::getenv("VIGIL_GGML_CPU_LIB");
    std::vector<std::filesystem::path> candidates;
    if (env) candidates.emplace_back(env);
    const std::filesystem::path site = std::filesystem::path(VIGIL_SOURCE_DIR) / ".venv-ref" / "lib";
    std::error_code ec;
    for (const auto& py : std::filesystem::directory_iterator(site, ec)) {
      candidates.push_back(py.path() / "site-packages" / "llama_cpp" / "lib" / "libggml-cpu.so");
    }
    for (const auto& path : candidates) {
      r.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (r.handle) break;
    }
    if (!r.handle) return r;
    if (auto init = reinterpret_cast<void (*)()>(dlsym(r.handle, "ggml_cpu_init"))) init();
    r.quantize_q8_0 = reinterpret_cast<QuantizeRow>(dlsym(r.handle, "quantize_row_q8_0"));
    r.quantize_q8_1 = reinterpret_cast<QuantizeRow>(dlsym(r.handle, "quantize_row_q8_1"));
    r.dot_q4_1 = reinterpret_cast<VecDot>(dlsym(r.handle, "ggml_vec_dot_q4_1_q8_1"));
    r.dot_q8_0 = reinterpret_cast<VecDot>(dlsym(r.handle, "ggml_vec_dot_q8_0_q8_0"));
    r.dot_q4_0 = reinterpret_cast<VecDot>(dlsym(r.handle, "ggml_vec_dot_q4_0_q8_0"));
    return r;
  }();
  return g;
}

#define REQUIRE_GGML()                                                                      \
  if (!ggml().quantize_q8_1 || !ggml().dot_q4_1 || !ggml().dot_q8_0 || !ggml().dot_q4_0) { \
    GTEST_FAIL() << "libggml-cpu.so not found (run scripts/setup_reference.sh)";            \
  }

// Realistic activations plus blocks full of exact ties and outliers (finite only: ggml leaves
// NaN/Inf undefined).
std::vector<float> activations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(rng);
    if (i / 32 % 5 == 1) x[i] = static_cast<float>(static_cast<int>(i % 9) - 4) * 0.5f;
    if (i % 97 == 0) x[i] *= 1000.0f;
  }
  return x;
}

const kernels::KernelSet* kernel_set(std::string_view path) {
  if (path == "avx512-vnni") return &kernels::kernels_avx512_vnni();
  if (path == "avx2") return &kernels::kernels_avx2();
  return &kernels::kernels_scalar();
}

TEST(GgmlParity, ActivationQuantizersProduceGgmlBits) {
  REQUIRE_GGML();
  const int64_t n = 32 * 200;
  const auto x = activations(n, 3);
  std::vector<BlockQ8_1> want1(static_cast<size_t>(n / 32));
  std::vector<BlockQ8_0> want0(static_cast<size_t>(n / 32));
  ggml().quantize_q8_1(x.data(), want1.data(), n);
  ggml().quantize_q8_0(x.data(), want0.data(), n);
  for (std::string_view path : available_cpu_kernel_paths()) {
    std::vector<int8_t> qs(static_cast<size_t>(n)), qs0(static_cast<size_t>(n));
    std::vector<float> d(static_cast<size_t>(n / 32)), s(d.size()), d0(d.size());
    kernel_set(path)->quantize_q8_1(x.data(), n, qs.data(), d.data(), s.data(), 1);
    kernel_set(path)->quantize_q8_0(x.data(), n, qs0.data(), d0.data());
    for (size_t b = 0; b < d.size(); ++b) {
      ASSERT_EQ(fp32_to_fp16(d[b]), want1[b].d) << path << " block " << b;
      ASSERT_EQ(fp32_to_fp16(s[b]), want1[b].s) << path << " block " << b;
      ASSERT_EQ(fp32_to_fp16(d0[b]), want0[b].d) << path << " block " << b;
      for (int j = 0; j < 32; ++j) {
        ASSERT_EQ(qs[b * 32 + static_cast<size_t>(j)], want1[b].qs[j]) << path << " block " << b;
        ASSERT_EQ(qs0[b * 32 + static_cast<size_t>(j)], want0[b].qs[j]) << path << " block " << b;
      }
    }
  }
}

// Our matmul against ggml's own vec_dot on the model's shapes (rows of 576 and 1536), for the
// one-token (gemv), two-token and batched (5 tokens) kernels; 37 rows leave a tail for the
// interleaved rows of each.
TEST(GgmlParity, MatmulMatchesGgmlDotProducts) {
  REQUIRE_GGML();
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::mt19937 rng(17);
  struct Case {
    GgmlType type;
    size_t block_bytes;
    VecDot dot;
    QuantizeRow quantize;
    size_t act_block_bytes;
  };
  const Case cases[] = {
      {GgmlType::Q4_1, sizeof(BlockQ4_1), ggml().dot_q4_1, ggml().quantize_q8_1, sizeof(BlockQ8_1)},
      {GgmlType::Q8_0, sizeof(BlockQ8_0), ggml().dot_q8_0, ggml().quantize_q8_0, sizeof(BlockQ8_0)},
      {GgmlType::Q4_0, sizeof(BlockQ4_0), ggml().dot_q4_0, ggml().quantize_q8_0, sizeof(BlockQ8_0)},
  };
  for (const Case& c : cases) {
    for (int64_t cols : {576, 1536}) {
      for (int64_t n_tokens : {1, 2, 5}) {
      const int64_t rows = 37;
      std::vector<uint8_t> w(static_cast<size_t>(rows * cols / 32) * c.block_bytes);
      for (auto& b : w) b = static_cast<uint8_t>(rng());
      std::uniform_real_distribution<float> scale(0.002f, 0.05f);
      for (size_t at = 0; at < w.size(); at += c.block_bytes) {
        const uint16_t d = fp32_to_fp16(scale(rng)), m = fp32_to_fp16(-8.0f * scale(rng));
        std::memcpy(w.data() + at, &d, 2);
        if (c.type == GgmlType::Q4_1) std::memcpy(w.data() + at + 2, &m, 2);
      }
      const auto x = activations(cols * n_tokens, static_cast<uint32_t>(cols));
      std::vector<float> want(static_cast<size_t>(rows * n_tokens));
      std::vector<uint8_t> xq(static_cast<size_t>(cols / 32) * c.act_block_bytes);
      for (int64_t t = 0; t < n_tokens; ++t) {
        c.quantize(x.data() + t * cols, xq.data(), cols);
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* row = w.data() + static_cast<size_t>(r * cols / 32) * c.block_bytes;
          const size_t i = static_cast<size_t>(t * rows + r);
          c.dot(static_cast<int>(cols), &want[i], 0, row, 0, xq.data(), 0, 1);
        }
      }
      for (std::string_view path : available_cpu_kernel_paths()) {
        select_cpu_kernel_path(path);
        std::vector<float> got(want.size());
        matmul(WeightView{c.type, w.data(), rows, cols}, x.data(), n_tokens, got.data(), pool, scratch);
        // Bit for bit: Q8 activation rounding in the next layer turns any last-bit difference
        // into a visible one, so token-exactness needs ggml's exact arithmetic.
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << path << " type " << static_cast<int>(c.type) << " cols " << cols
                                     << " tokens " << n_tokens << " i " << i;
        }
      }
      select_cpu_kernel_path("");
      }
    }
  }
}

}  // namespace
}  // namespace vigil
