// Vector operations of the forward pass besides matmul (attention over the f16 KV cache, softmax,
// SwiGLU, RoPE), SIMD-dispatched like the matmul kernels and ordered like ggml's so results match
// llama.cpp's AVX-512 build bit for bit on every path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vigil {

// out[j] = scale · Σ a[i] · k_j[i] for the f16 rows k_j = k + j·stride, j < rows; n is a multiple
// of 16. Two summation orders, both llama.cpp's: one 16-lane accumulator chain (its batched matmul,
// used for prompts), or four 16-lane accumulators over 64-element steps (its vector dot, used when
// it decodes one token). One call covers the rows of one KV block, so the per-row reduction is
// the inner loop.
void dot_rows_f16(const float* a, const uint16_t* k, size_t stride, int rows, int n, float scale, float* out);
void dot_rows_f16_4acc(const float* a, const uint16_t* k, size_t stride, int rows, int n, float scale, float* out);
// out[i] = fma(w, v[i], out[i]) with v in f16; n is a multiple of 16.
void axpy_f16(float w, const uint16_t* v, float* out, int n);
// out[d] = sum of lanes[0..16)[d] in the order of _mm512_reduce_add_ps: a weighted sum kept as 16
// lane partials (position p in lane p % 16, as a 16-wide dot product accumulates) is finished here.
void reduce_lanes(const float* lanes, int n, float* out);  // lanes: [16][n]
// As reduce_lanes for four groups of 16 lanes (position p in group (p / 16) % 4, lane p % 16):
// groups combined (0+2), (1+3), then together, as ggml's 4-accumulator reduction does.
void reduce_lane_groups(const float* lanes, int n, float* out);  // lanes: [4][16][n]
// out[i] = x[i] · scale rounded to f16 and back (llama.cpp converts Q and the softmax weights to
// f16 before its f16 products); x and out may be the same array.
void round_to_fp16(const float* x, float scale, float* out, int n);
// x[i] = exp(x[i] - max) for i < n; returns Σ x[i] in double, summed per 16-element chunk.
double exp_and_sum(float* x, int n, float max);
// gate[i] = silu(gate[i]) · up[i] for one row of n elements.
void swiglu_row(float* gate, const float* up, int n);
// RoPE on one head of adjacent pairs, (x0, x1) -> (x0·cos − x1·sin, x0·sin + x1·cos) for pair i
// with cos[i], sin[i], rounded as llama.cpp's FMA build computes it: GCC contracts ggml's
// `x0*cos - x1*sin` into fma(x0, cos, −(x1·sin)) (and the sum likewise), one rounding fewer than
// the plain expression. A one-ulp difference here flips f16 roundings of Q/K in the cache now and
// then, which is enough to move logits by 0.5 after 30 layers.
void rope_pairs(float* head, int head_dim, const float* cos, const float* sin);

}  // namespace vigil
