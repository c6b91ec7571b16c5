// Internal interface between the matmul driver and its per-ISA kernel sets (scalar, AVX2, AVX-512).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/cpu/matmul.h"

namespace vigil::kernels {

// Most tokens one tile call covers; the driver splits larger batches (Q6_K keeps per-token sums
// on the stack).
inline constexpr int64_t kMaxTileTokens = 64;

// The activations of one matmul, prepared once for every tile: quantized for the quantized
// weight types, rounded to the weight's precision for F16/BF16, as given for F32.
struct Activations {
  // Q8_0 / Q8_1 / Q8_K: qs [n_tokens][q_stride], d [n_tokens][n_blocks].
  const int8_t* qs = nullptr;
  int64_t q_stride = 0;
  const float* d = nullptr;  // the block scale as the kernels multiply it (fp16-rounded for Q8_0/1)
  int64_t n_blocks = 0;
  // Q8_1 only: fp16-rounded d·Σq, block-major [n_blocks][s_stride] so that the s of consecutive
  // tokens load as one vector; readable 8 floats past the last token.
  const float* s = nullptr;
  int64_t s_stride = 0;
  const int16_t* bsums = nullptr;  // Q8_K only: [n_tokens][n_blocks * 16]
  // F32 / F16 / BF16: [n_tokens][f_stride]
  const float* f = nullptr;
  int64_t f_stride = 0;
};

// Matmuls of at most this many tokens take the decode kernels, which stream one row at a time
// (same results as the batched kernels, bit for bit).
inline constexpr int64_t kDecodeTokens = 2;

struct TileJob {
  const WeightView* w = nullptr;
  int64_t n_tokens = 0;  // of the whole matmul
  size_t row_bytes = 0;
  const Activations* act = nullptr;
  float* y = nullptr;  // [n_tokens][w->rows]
};

// Computes y[t][r] for r in [r0, r1), t in [t0, t1) (t1 - t0 <= kMaxTileTokens).
using TileFn = void (*)(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);

struct KernelSet {
  std::string_view name;
  void (*quantize_q8_0)(const float* x, int64_t n, int8_t* qs, float* d);
  // s[b * s_stride] for block b (see Activations::s).
  void (*quantize_q8_1)(const float* x, int64_t n, int8_t* qs, float* d, float* s, int64_t s_stride);
  TileFn f32, f16, bf16, q4_0, q4_1, q8_0, q6_k;
};

const KernelSet& kernels_scalar();
const KernelSet& kernels_avx2();
// Only where the CPU has the path (cpu_has_avx512_vnni): the set's statics are built with AVX-512
// instructions, so even taking it raises SIGILL on an AVX2-only CPU.
const KernelSet& kernels_avx512_vnni();

// Q6_K has one portable kernel shared by every set (no model we run uses it for big matrices).
void tile_q6_k_portable(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);

}  // namespace vigil::kernels
