// Cross-backend test (llama.cpp test-backend-ops style): every CUDA op on random inputs against a
// CPU reference with a per-op normalized-error bound, then the whole model against CpuForward.
// Needs a GPU: without one it fails (exit 1) before running anything. Run by tests/gpu/device_check.sh.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cpu/cpu_forward.h"
#include "backend/cpu/kv_cache.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/kv_blocks.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"
#include "model/llama_model.h"

namespace vigil::cuda {
namespace {

// Normalized mean squared error, test-backend-ops' measure: Σ(a−b)² / Σb².
double nmse(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], r = ref[i];
    num += (g - r) * (g - r);
    den += r * r;
  }
  return den > 0 ? num / den : num;
}

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { VIGIL_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T))); }
  explicit Dev(const std::vector<T>& h) : Dev(h.size()) {
    VIGIL_CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Dev() { (void)cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> get() const {
    VIGIL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(n);
    VIGIL_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

std::mt19937 rng(1234);
std::vector<float> randn(size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void put_half(uint8_t* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// Random but valid GGUF rows of `type`: random scales and quants.
std::vector<uint8_t> random_rows(GgmlType type, int rows, int cols) {
  const int nb = cols / 32;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  const int bb = type == GgmlType::Q4_1 ? 20 : type == GgmlType::Q8_0 ? 34 : type == GgmlType::F16 ? 64 : 128;
  std::vector<uint8_t> out(static_cast<size_t>(rows) * nb * bb);
  for (size_t b = 0; b < out.size() / bb; ++b) {
    uint8_t* p = &out[b * bb];
    if (type == GgmlType::F32) {
      for (int j = 0; j < 32; ++j) {
        const float f = scale(rng) * static_cast<float>(byte(rng) - 128);
        std::memcpy(p + 4 * j, &f, 4);
      }
      continue;
    }
    if (type == GgmlType::F16) {
      for (int j = 0; j < 32; ++j) put_half(p + 2 * j, scale(rng) * static_cast<float>(byte(rng) - 128));
      continue;
    }
    put_half(p, scale(rng));
    int start = 2;
    if (type == GgmlType::Q4_1) put_half(p + 2, -8.0f * scale(rng)), start = 4;
    for (int j = start; j < bb; ++j) p[j] = static_cast<uint8_t>(byte(rng));
  }
  return out;
}

// Reference product in double over the exactly dequantized weights.
std::vector<float> ref_matmul(GgmlType type, const std::vector<uint8_t>& w, int rows, int cols,
                              const std::vector<float>& x, int n) {
  const size_t rb = w.size() / static_cast<size_t>(rows);
  std::vector<float> wr(static_cast<size_t>(cols)), y(static_cast<size_t>(n) * rows);
  for (int r = 0; r < rows; ++r) {
    dequantize_row(type, &w[static_cast<size_t>(r) * rb], cols, wr.data());
    for (int t = 0; t < n; ++t) {
      double s = 0;
      for (int c = 0; c < cols; ++c) s += static_cast<double>(wr[static_cast<size_t>(c)]) * static_cast<double>(x[static_cast<size_t>(t) * cols + c]);
      y[static_cast<size_t>(t) * rows + r] = static_cast<float>(s);
    }
  }
  return y;
}

struct MatmulCase {
  GgmlType type;
  int n;
};

class CudaMatmul : public ::testing::TestWithParam<MatmulCase> {};

// Bounds: f16 activations (cuBLAS) cost ~1e-6 NMSE; the GEMV reads x in f32. 5e-4 is
// test-backend-ops' bound for matrix products.
TEST_P(CudaMatmul, GemvAndCublasMatchTheCpuReference) {
  const auto [type, n] = GetParam();
  const int rows = 192, cols = 576;
  std::vector<uint8_t> wq = random_rows(type, rows, cols);
  std::vector<float> x = randn(static_cast<size_t>(n) * cols);
  const std::vector<float> ref = ref_matmul(type, wq, rows, cols, x, n);
  Dev<uint8_t> dq(wq);
  Dev<__half> df16(static_cast<size_t>(rows) * cols);
  DeviceWeight w{static_cast<DeviceType>(type), rows, cols, dq.p, nullptr};
  dequantize_weight(w, df16.p, nullptr);
  w.f16 = df16.p;
  Dev<float> dx(x), dy(static_cast<size_t>(n) * rows);
  Dev<__half> dx16(x.size());
  to_half(dx.p, dx16.p, static_cast<int64_t>(x.size()), nullptr);
  cublasHandle_t h;
  VIGIL_CUDA_CHECK(cublasCreate(&h));
  gemm_cublas(h, w, dx16.p, n, dy.p);
  EXPECT_LT(nmse(dy.get(), ref), 5e-4) << "cublas";
  VIGIL_CUDA_CHECK(cublasDestroy(h));
  if (n <= kMaxGemvRows) {
    gemv_quant(w, dx.p, n, dy.p, nullptr);
    EXPECT_LT(nmse(dy.get(), ref), 1e-6) << "gemv";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaMatmul,
                         ::testing::Values(MatmulCase{GgmlType::Q4_1, 1}, MatmulCase{GgmlType::Q4_1, 8},
                                           MatmulCase{GgmlType::Q4_1, 33}, MatmulCase{GgmlType::Q8_0, 1},
                                           MatmulCase{GgmlType::Q8_0, 5}, MatmulCase{GgmlType::Q8_0, 64},
                                           MatmulCase{GgmlType::F16, 3}, MatmulCase{GgmlType::F32, 2}));

TEST(CudaOps, RmsNormMatchesCpu) {
  const int rows = 5, n = 576;
  auto x = randn(static_cast<size_t>(rows) * n), w = randn(n);
  std::vector<float> ref(x.size());
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(x[static_cast<size_t>(r * n + i)] * x[static_cast<size_t>(r * n + i)]);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + 1e-5f);
    for (int i = 0; i < n; ++i) ref[static_cast<size_t>(r * n + i)] = x[static_cast<size_t>(r * n + i)] * scale * w[static_cast<size_t>(i)];
  }
  Dev<float> dx(x), dw(w), dy(x.size());
  rms_norm(dx.p, nullptr, dw.p, rows, n, 1e-5f, dy.p, nullptr);
  EXPECT_LT(nmse(dy.get(), ref), 1e-10);
}

TEST(CudaOps, RopeSwigluAddAndArgmaxMatchCpu) {
  const int rows = 3, nh = 9, nkv = 3, hd = 64, half = hd / 2, max_pos = 64;
  auto q = randn(static_cast<size_t>(rows) * nh * hd), k = randn(static_cast<size_t>(rows) * nkv * hd);
  std::vector<float> cs(static_cast<size_t>(max_pos) * half), sn(cs.size());
  for (size_t i = 0; i < cs.size(); ++i) cs[i] = std::cos(0.01f * static_cast<float>(i)), sn[i] = std::sin(0.01f * static_cast<float>(i));
  std::vector<int32_t> pos = {0, 17, 63};
  auto rq = q, rk = k;
  auto rot = [&](float* head, int p) {
    for (int i = 0; i < half; ++i) {
      const float c = cs[static_cast<size_t>(p * half + i)], s = sn[static_cast<size_t>(p * half + i)];
      const float x0 = head[2 * i], x1 = head[2 * i + 1];
      head[2 * i] = x0 * c - x1 * s;
      head[2 * i + 1] = x0 * s + x1 * c;
    }
  };
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < nh; ++h) rot(&rq[static_cast<size_t>((r * nh + h) * hd)], pos[static_cast<size_t>(r)]);
    for (int h = 0; h < nkv; ++h) rot(&rk[static_cast<size_t>((r * nkv + h) * hd)], pos[static_cast<size_t>(r)]);
  }
  Dev<float> dq(q), dk(k), dc(cs), ds(sn);
  Dev<int32_t> dp(pos);
  rope(dq.p, dk.p, dp.p, dc.p, ds.p, rows, nh, nkv, hd, nullptr);
  EXPECT_LT(nmse(dq.get(), rq), 1e-12);
  EXPECT_LT(nmse(dk.get(), rk), 1e-12);

  auto g = randn(1000), u = randn(1000);
  std::vector<float> rs(g.size()), ra(g.size());
  for (size_t i = 0; i < g.size(); ++i) rs[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i], ra[i] = g[i] + u[i];
  Dev<float> dg(g), du(u), da(g);
  swiglu(dg.p, du.p, 1000, nullptr);
  add_into(da.p, du.p, 1000, nullptr);
  EXPECT_LT(nmse(dg.get(), rs), 1e-10);
  EXPECT_LT(nmse(da.get(), ra), 1e-14);

  std::vector<float> logits = randn(2 * 49152);
  logits[77] = 50.0f;
  logits[49152 + 4000] = logits[49152 + 3000] = 60.0f;  // tie: the lower index wins, as the CPU sampler
  Dev<float> dl(logits);
  Dev<int32_t> am(2);
  argmax_rows(dl.p, 2, 49152, am.p, nullptr);
  EXPECT_EQ(am.get(), (std::vector<int32_t>{77, 3000}));
}

TEST(CudaOps, EmbeddingMatchesCpuDequantization) {
  const int vocab = 10, n = 576;
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_1}) {
    auto table = random_rows(type, vocab, n);
    std::vector<int32_t> tokens = {3, 0, 9, 3};
    const size_t rb = table.size() / vocab;
    std::vector<float> ref(tokens.size() * n);
    for (size_t i = 0; i < tokens.size(); ++i) dequantize_row(type, &table[static_cast<size_t>(tokens[i]) * rb], n, &ref[i * n]);
    Dev<uint8_t> dt(table);
    Dev<int32_t> dtok(tokens);
    Dev<float> dx(ref.size());
    embed_rows(dt.p, static_cast<DeviceType>(type), dtok.p, 4, n, dx.p, nullptr);
    EXPECT_EQ(dx.get(), ref) << ggml_type_name(type);
  }
}

// Paged attention over scattered blocks against a CPU loop with the CPU backend's roundings.
TEST(CudaOps, PagedAttentionMatchesCpu) {
  const int nh = 9, nkv = 3, hd = 64, bs = 16, n_blocks = 8, max_pos = 128, max_blocks = max_pos / bs;
  const int kv_dim = nkv * hd;
  std::vector<float> kvf = randn(static_cast<size_t>(n_blocks) * 2 * bs * kv_dim);
  std::vector<__half> cache(kvf.size());
  for (size_t i = 0; i < kvf.size(); ++i) cache[i] = __float2half_rn(kvf[i]);
  std::vector<int32_t> pos = {0, 40}, table(2 * max_blocks, 0);
  table[0] = 5;
  table[static_cast<size_t>(max_blocks)] = 2, table[static_cast<size_t>(max_blocks) + 1] = 7, table[static_cast<size_t>(max_blocks) + 2] = 1;
  auto q = randn(2 * static_cast<size_t>(nh) * hd);
  std::vector<float> ref(q.size(), 0.0f);
  auto at = [&](int blk, int kv, int slot, int e) {
    return __half2float(cache[((static_cast<size_t>(blk) * 2 + kv) * bs + slot) * kv_dim + e]);
  };
  for (int r = 0; r < 2; ++r)
    for (int h = 0; h < nh; ++h) {
      const int off = (h / (nh / nkv)) * hd;
      std::vector<float> s(static_cast<size_t>(pos[static_cast<size_t>(r)]) + 1);
      float m = -INFINITY;
      for (size_t p = 0; p < s.size(); ++p) {
        float dot = 0;
        for (int e = 0; e < hd; ++e)
          dot += fp16_to_fp32(fp32_to_fp16(q[static_cast<size_t>((r * nh + h) * hd + e)])) *
                 at(table[static_cast<size_t>(r * max_blocks) + p / bs], 0, static_cast<int>(p % bs), off + e);
        s[p] = dot / std::sqrt(static_cast<float>(hd));
        m = std::max(m, s[p]);
      }
      double sum = 0;
      for (float& v : s) v = std::exp(v - m), sum += static_cast<double>(v);
      for (size_t p = 0; p < s.size(); ++p) {
        const float w = fp16_to_fp32(fp32_to_fp16(s[p] * static_cast<float>(1.0 / sum)));
        for (int e = 0; e < hd; ++e)
          ref[static_cast<size_t>((r * nh + h) * hd + e)] +=
              w * at(table[static_cast<size_t>(r * max_blocks) + p / bs], 1, static_cast<int>(p % bs), off + e);
      }
    }
  Dev<__half> dc(cache);
  Dev<float> dq(q), dout(q.size());
  Dev<int32_t> dp(pos), dt(table);
  prepare_attention(max_pos);
  paged_attention(dq.p, dc.p, dp.p, dt.p, max_blocks, 2, nh, nkv, hd, bs, max_pos, dout.p, nullptr);
  EXPECT_LT(nmse(dout.get(), ref), 1e-8);
}


// The whole model: prefill logits of a 40-token batch spread over two sequences, CPU backend
// against the CUDA backend for each matmul path; then decode steps with graphs on and off must
// give bit-identical logits (the graph replays the same kernels on the same rows). The CPU
// quantizes activations to q8 for its dot products and the GPU does not, hence the bound.
TEST(CudaModel, LogitsMatchTheCpuBackendAndGraphsMatchEager) {
  auto model = LlamaModel::load(VIGIL_MODEL_PATH);
  const LlamaHparams& hp = model->hparams();
  constexpr int kBs = 16, kBlocks = 16, kMaxPos = 128;
  KvCache cache(hp, kBlocks, kBs);
  KvBlockAllocator blocks(kBlocks);
  KvSequence a, b;
  ASSERT_TRUE(blocks.reserve(a, kMaxPos / 2, kBs));
  ASSERT_TRUE(blocks.reserve(b, kMaxPos / 2, kBs));
  std::uniform_int_distribution<int32_t> tok(0, hp.n_vocab - 1);
  std::vector<BatchToken> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back({.token = tok(rng), .pos = i / 2, .seq = i % 2 ? &b : &a, .want_logits = i >= 38});
  ThreadPool pool(4);
  CpuForward cpu(*model, cache, pool, 40, kMaxPos);
  cpu.forward(batch);
  for (auto mm : {CudaOptions::Matmul::kAuto, CudaOptions::Matmul::kCublas, CudaOptions::Matmul::kGemv}) {
    CudaOptions opt;
    opt.max_batch = 40;
    opt.max_positions = kMaxPos;
    opt.n_blocks = kBlocks;
    opt.block_size = kBs;
    opt.matmul = mm;
    std::vector<float> eager_logits;
    for (bool graphs : {false, true}) {
      opt.graphs = graphs;
      CudaBackend gpu(*model, opt);
      gpu.forward(batch);
      ASSERT_EQ(gpu.n_logits(), 2);
      for (int r = 0; r < 2; ++r) {
        auto g = gpu.logits(r), c = cpu.logits(r);
        EXPECT_LT(nmse({g.begin(), g.end()}, {c.begin(), c.end()}), 1e-3) << "matmul " << static_cast<int>(mm);
      }
      // Three decode steps of both sequences (a bucket of 2).
      for (int step = 0; step < 3; ++step) {
        std::vector<BatchToken> next = {{gpu.argmax(0), 20 + step, &a, true}, {gpu.argmax(1), 20 + step, &b, true}};
        gpu.forward(next);
      }
      std::vector<float> last(gpu.logits(1).begin(), gpu.logits(1).end());
      if (!graphs) eager_logits = last;
      else EXPECT_EQ(last, eager_logits) << "graph replay differs from eager, matmul " << static_cast<int>(mm);
      if (graphs) {
        EXPECT_EQ(gpu.graph_stats()->captures, 1u);
        EXPECT_EQ(gpu.graph_stats()->launches, 3u);
      }
    }
  }
}

}  // namespace
}  // namespace vigil::cuda

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "FAIL: cuda_backend_ops_test needs a CUDA GPU (%s, %d devices)\n", cudaGetErrorName(e), devices);
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
