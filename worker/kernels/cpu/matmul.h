// Quantized matrix products for the CPU backend: y = x · Wᵀ for a batch of token rows.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/ggml_types.h"
#include "kernels/cpu/thread_pool.h"

namespace vigil {

// Grow-only buffers for quantized activations; after the first call of a given size, matmul
// allocates nothing.
class MatmulScratch {
 public:
  uint8_t* reserve(size_t bytes);

 private:
  std::vector<uint8_t> buf_;
};

// y[t, r] = Σ_c W[r, c] · x[t, c] for t < n_tokens, r < rows.
// Activations are quantized like ggml's CPU backend (Q8_1 for Q4_1, Q8_0 for Q4_0/Q8_0, Q8_K for
// Q6_K; F16/BF16 weights see x rounded to their type). For Q4_0, Q4_1 and Q8_0 the results are
// bit-identical to llama.cpp's x86 build on every kernel path and for any batch composition.
// x: [n_tokens, cols] f32, y: [n_tokens, rows] f32. Weights are read once for the whole batch.
// Supported types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q6_K; others throw std::invalid_argument.
void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch);

// Expands one row of `n` elements of `type` to f32 (embedding lookup, reference checks).
void dequantize_row(GgmlType type, const uint8_t* row, int64_t n, float* out);

// The SIMD path chosen at start-up from the CPU's features: "avx512-vnni", "avx2" or "scalar".
// VIGIL_KERNEL_PATH=avx2|scalar forces a slower path (tests use it to cover every path);
// asking for a path the CPU lacks throws std::runtime_error naming it.
std::string_view cpu_kernel_path();

// Switches the path now, as VIGIL_KERNEL_PATH would at start-up ("" or "auto": the best one).
// Throws like cpu_kernel_path(). Not safe while a matmul runs on another thread.
void select_cpu_kernel_path(std::string_view path);

// The paths this CPU can run, best first ("scalar" always last).
std::vector<std::string_view> available_cpu_kernel_paths();

}  // namespace vigil
