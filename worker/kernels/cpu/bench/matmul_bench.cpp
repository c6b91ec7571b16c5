// Matmul throughput on the model's shapes: GB/s of weights streamed (decode) and GFLOP/s (prefill).
// The path is the automatic one; VIGIL_KERNEL_PATH=avx2|scalar measures the others.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quants.h"

namespace vigil {
namespace {

// Random quants with sane fp16 scales: speed does not depend on the values, only on the layout.
std::vector<uint8_t> make_weights(GgmlType type, int64_t rows, int64_t cols) {
  const size_t block_bytes = type == GgmlType::Q4_1 ? sizeof(BlockQ4_1) : sizeof(BlockQ8_0);
  std::vector<uint8_t> w(static_cast<size_t>(rows * cols / kQK) * block_bytes);
  std::mt19937 rng(1);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  for (size_t at = 0; at < w.size(); at += block_bytes) {
    const uint16_t d = fp32_to_fp16(0.01f);
    std::memcpy(w.data() + at, &d, 2);
    if (type == GgmlType::Q4_1) std::memcpy(w.data() + at + 2, &d, 2);
  }
  return w;
}

ThreadPool& pool_of(int threads) {
  static std::unique_ptr<ThreadPool> pools[3];
  if (!pools[threads]) pools[threads] = std::make_unique<ThreadPool>(threads);
  return *pools[threads];
}

// Args: weight type, rows, cols, tokens, threads.
void BM_Matmul(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), tokens = state.range(3);
  ThreadPool& pool = pool_of(static_cast<int>(state.range(4)));
  const auto w = make_weights(type, rows, cols);
  std::vector<float> x(static_cast<size_t>(tokens * cols), 0.5f), y(static_cast<size_t>(tokens * rows));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.1f - 0.8f;
  MatmulScratch scratch;
  const WeightView view{type, w.data(), rows, cols};
  for (auto _ : state) {
    matmul(view, x.data(), tokens, y.data(), pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(cpu_kernel_path()));
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(w.size()) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(rows * cols * tokens),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// llama.cpp's own kernel for the same work on one thread (quantize each token, one vec_dot per
// row and token, as ggml_compute_forward_mul_mat does for Q4_1), from the libggml-cpu that
// scripts/setup_reference.sh builds; VIGIL_GGML_CPU_LIB overrides the path.
using QuantizeRow = void (*)(const float* x, void* y, int64_t k);
using VecDot = void (*)(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by, int nrc);

void* ggml_cpu_library() {
  static void* handle = [] {
    std::vector<std::filesystem::path> candidates;
    if (const char* env = std::getenv("VIGIL_GGML_CPU_LIB")) candidates.emplace_back(env);
    std::error_code ec;
    for (const auto& py : std::filesystem::directory_iterator(VIGIL_SOURCE_DIR "/.venv-ref/lib", ec)) {
      candidates.push_back(py.path() / "site-packages/llama_cpp/lib/libggml-cpu.so");
    }
    for (const auto& path : candidates) {
      if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        if (auto init = reinterpret_cast<void (*)()>(dlsym(h, "ggml_cpu_init"))) init();
        return h;
      }
    }
    return static_cast<void*>(nullptr);
  }();
  return handle;
}

void BM_GgmlVecDot(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), tokens = state.range(3);
  void* lib = ggml_cpu_library();
  if (lib == nullptr) {
    state.SkipWithError("libggml-cpu.so not found (scripts/setup_reference.sh)");
    return;
  }
  const bool q4_1 = type == GgmlType::Q4_1;
  const auto quantize = reinterpret_cast<QuantizeRow>(dlsym(lib, q4_1 ? "quantize_row_q8_1" : "quantize_row_q8_0"));
  const auto dot = reinterpret_cast<VecDot>(dlsym(lib, q4_1 ? "ggml_vec_dot_q4_1_q8_1" : "ggml_vec_dot_q8_0_q8_0"));
  const size_t w_row = static_cast<size_t>(cols / kQK) * (q4_1 ? sizeof(BlockQ4_1) : sizeof(BlockQ8_0));
  const size_t x_row = static_cast<size_t>(cols / kQK) * (q4_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0));
  const auto w = make_weights(type, rows, cols);
  std::vector<float> x(static_cast<size_t>(tokens * cols)), y(static_cast<size_t>(tokens * rows));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.1f - 0.8f;
  std::vector<uint8_t> xq(x_row * static_cast<size_t>(tokens));
  for (auto _ : state) {
    for (int64_t t = 0; t < tokens; ++t) quantize(x.data() + t * cols, xq.data() + static_cast<size_t>(t) * x_row, cols);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        dot(static_cast<int>(cols), &y[static_cast<size_t>(t * rows + r)], 0, w.data() + static_cast<size_t>(r) * w_row, 0,
            xq.data() + static_cast<size_t>(t) * x_row, 0, 1);
      }
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel("ggml");
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(w.size()) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(rows * cols * tokens),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The cost of one parallel_for hand-off with `gap_us` of single-threaded work before each call
// (decode alternates parallel matmuls with serial attention, norms and sampling).
void BM_ParallelForHandoff(benchmark::State& state) {
  ThreadPool& pool = pool_of(2);
  const auto gap = std::chrono::microseconds(state.range(0));
  std::atomic<int> sink{0};
  for (auto _ : state) {
    const auto until = std::chrono::steady_clock::now() + gap;
    while (std::chrono::steady_clock::now() < until) {
    }
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(2, [&](int task, int) { sink.fetch_add(task); });
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_ParallelForHandoff)->ArgNames({"gap_us"})->Arg(0)->Arg(20)->Arg(100)->Arg(1000)->UseManualTime();

constexpr int64_t kQ4_1 = static_cast<int64_t>(GgmlType::Q4_1);
constexpr int64_t kQ8_0 = static_cast<int64_t>(GgmlType::Q8_0);

// Every matrix of one SmolLM2-135M decode step (30 layers of q, k, v, o, gate, up, down in Q4_1,
// then the 49152×576 Q8_0 output head): ~113 MB, far beyond the caches, so this measures what a
// token costs when weights stream from memory.
struct ModelWeights {
  std::vector<std::vector<uint8_t>> data;
  std::vector<WeightView> views;
  size_t bytes = 0;
};
const ModelWeights& model_weights() {
  static const ModelWeights m = [] {
    ModelWeights w;
    const int64_t shapes[7][2] = {{576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536}};
    for (int layer = 0; layer < 30; ++layer) {
      for (const auto& shape : shapes) w.data.push_back(make_weights(GgmlType::Q4_1, shape[0], shape[1]));
    }
    w.data.push_back(make_weights(GgmlType::Q8_0, 49152, 576));
    for (size_t i = 0; i < w.data.size(); ++i) {
      const bool head = i + 1 == w.data.size();
      const int64_t* shape = shapes[i % 7];
      w.views.push_back(WeightView{head ? GgmlType::Q8_0 : GgmlType::Q4_1, w.data[i].data(),
                                   head ? 49152 : shape[0], head ? 576 : shape[1]});
      w.bytes += w.data[i].size();
    }
    return w;
  }();
  return m;
}

void BM_DecodeStepMatmuls(benchmark::State& state) {
  const ModelWeights& m = model_weights();
  const int64_t tokens = state.range(1);
  // A pool per spin setting: how long idle threads poll before sleeping matters most here.
  ThreadPool pool(static_cast<int>(state.range(0)), std::chrono::microseconds(state.range(2)));
  std::vector<float> x(static_cast<size_t>(1536 * tokens), 0.25f), y(static_cast<size_t>(49152 * tokens));
  MatmulScratch scratch;
  for (auto _ : state) {
    for (const WeightView& w : m.views) matmul(w, x.data(), tokens, y.data(), pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(cpu_kernel_path()));
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(m.bytes) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
}
// tokens > 1: one step of continuous batching over that many sequences.
BENCHMARK(BM_DecodeStepMatmuls)
    ->ArgNames({"threads", "tokens", "spin_us"})
    ->Args({1, 1, 0})->Args({2, 1, 0})->Args({2, 1, 10})->Args({2, 1, 30})->Args({2, 1, 100})->Args({2, 1, 1000})
    ->Args({1, 2, 0})->Args({1, 4, 0})->Args({1, 8, 0})->Args({2, 16, 100})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_GgmlDecodeStepMatmuls(benchmark::State& state) {
  void* lib = ggml_cpu_library();
  if (lib == nullptr) {
    state.SkipWithError("libggml-cpu.so not found (scripts/setup_reference.sh)");
    return;
  }
  const auto q8_1 = reinterpret_cast<QuantizeRow>(dlsym(lib, "quantize_row_q8_1"));
  const auto q8_0 = reinterpret_cast<QuantizeRow>(dlsym(lib, "quantize_row_q8_0"));
  const auto dot4_1 = reinterpret_cast<VecDot>(dlsym(lib, "ggml_vec_dot_q4_1_q8_1"));
  const auto dot8_0 = reinterpret_cast<VecDot>(dlsym(lib, "ggml_vec_dot_q8_0_q8_0"));
  const ModelWeights& m = model_weights();
  std::vector<float> x(1536, 0.25f), y(49152);
  std::vector<uint8_t> xq(1536 / kQK * sizeof(BlockQ8_1));
  for (auto _ : state) {
    for (const WeightView& w : m.views) {
      const bool q4_1 = w.type == GgmlType::Q4_1;
      (q4_1 ? q8_1 : q8_0)(x.data(), xq.data(), w.cols);
      const size_t row = static_cast<size_t>(w.cols / kQK) * (q4_1 ? sizeof(BlockQ4_1) : sizeof(BlockQ8_0));
      for (int64_t r = 0; r < w.rows; ++r) {
        (q4_1 ? dot4_1 : dot8_0)(static_cast<int>(w.cols), &y[static_cast<size_t>(r)], 0, w.data + static_cast<size_t>(r) * row, 0, xq.data(), 0, 1);
      }
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel("ggml, 1 thread");
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(m.bytes) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GgmlDecodeStepMatmuls)->UseRealTime()->Unit(benchmark::kMillisecond);

// SmolLM2-135M: FFN 576↔1536 (Q4_1), output head 49152×576 (Q8_0); decode and a 512-token prompt.
BENCHMARK(BM_Matmul)
    ->ArgNames({"type", "rows", "cols", "tokens", "threads"})
    ->Args({kQ4_1, 1536, 576, 1, 1})->Args({kQ4_1, 1536, 576, 1, 2})
    ->Args({kQ4_1, 576, 1536, 1, 1})->Args({kQ4_1, 576, 1536, 1, 2})
    ->Args({kQ8_0, 1536, 576, 1, 1})
    ->Args({kQ8_0, 49152, 576, 1, 1})->Args({kQ8_0, 49152, 576, 1, 2})
    ->Args({kQ4_1, 1536, 576, 16, 2})
    ->Args({kQ4_1, 1536, 576, 512, 1})->Args({kQ4_1, 1536, 576, 512, 2})
    ->Args({kQ4_1, 576, 1536, 512, 2})
    ->Args({kQ8_0, 49152, 576, 16, 2})
    ->UseRealTime();

BENCHMARK(BM_GgmlVecDot)
    ->ArgNames({"type", "rows", "cols", "tokens"})
    ->Args({kQ4_1, 1536, 576, 1})->Args({kQ4_1, 576, 1536, 1})->Args({kQ8_0, 49152, 576, 1})
    ->Args({kQ4_1, 1536, 576, 512})
    ->UseRealTime();

}  // namespace
}  // namespace vigil

BENCHMARK_MAIN();
