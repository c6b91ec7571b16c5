// Portable matmul kernels: the scalar path (any x86-64 CPU) and the Q6_K kernel every path shares.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/quants.h"

namespace vigil::kernels {
namespace {

float f32_at(const uint8_t* row, int64_t c) {
  float v;
  std::memcpy(&v, row + 4 * c, sizeof v);
  return v;
}
float f16_at(const uint8_t* row, int64_t c) { return fp16_to_fp32(load_u16(row + 2 * c)); }
float bf16_at(const uint8_t* row, int64_t c) { return bf16_to_fp32(load_u16(row + 2 * c)); }

template <float (*kAt)(const uint8_t*, int64_t)>
void tile_float(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightView& w = *job.w;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + static_cast<size_t>(r) * job.row_bytes;
    for (int64_t t = t0; t < t1; ++t) {
      const float* x = job.act->f + t * job.act->f_stride;
      float sum = 0.0f;
      for (int64_t c = 0; c < w.cols; ++c) sum += kAt(row, c) * x[c];
      job.y[t * w.rows + r] = sum;
    }
  }
}

// Q4_0 / Q4_1 / Q8_0 against Q8_0 / Q8_1 activations, with ggml's x86 arithmetic emulated step
// by step so that this path gives llama.cpp's bits too (see microtile_q32 in matmul_simd.h):
// 8 lanes of exact integer sums over 4 elements each, fused into lane accumulators block by
// block, ggml's horizontal-sum order, then Q4_1's Σ m·s by fused multiply-adds.
enum class Kind { Q4_0, Q4_1, Q8_0 };

float ggml_hsum8(const float lane[8]) {
  const float r0 = lane[4] + lane[0], r1 = lane[5] + lane[1], r2 = lane[6] + lane[2], r3 = lane[7] + lane[3];
  return (r0 + r2) + (r1 + r3);
}

template <Kind kKind>
void tile_q32(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  constexpr size_t kBlockBytes = kKind == Kind::Q4_0   ? sizeof(BlockQ4_0)
                                 : kKind == Kind::Q4_1 ? sizeof(BlockQ4_1)
                                                       : sizeof(BlockQ8_0);
  const WeightView& w = *job.w;
  const Activations& a = *job.act;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + static_cast<size_t>(r) * job.row_bytes;
    for (int64_t t = t0; t < t1; ++t) {
      const int8_t* xq = a.qs + t * a.q_stride;
      const float* xd = a.d + t * a.n_blocks;
      float lane[8] = {};
      float m_terms = 0.0f;
      for (int64_t b = 0; b < a.n_blocks; ++b, xq += kQK) {
        const uint8_t* blk = row + static_cast<size_t>(b) * kBlockBytes;
        int wq[kQK];  // the weight block as integers, in element order
        if constexpr (kKind == Kind::Q8_0) {
          const auto* q = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ8_0, qs));
          for (int j = 0; j < kQK; ++j) wq[j] = q[j];
        } else {
          const int offset = kKind == Kind::Q4_0 ? 8 : 0;
          const uint8_t* qs = blk + (kKind == Kind::Q4_0 ? offsetof(BlockQ4_0, qs) : offsetof(BlockQ4_1, qs));
          for (int j = 0; j < kQK / 2; ++j) {
            wq[j] = (qs[j] & 0x0f) - offset;
            wq[j + kQK / 2] = (qs[j] >> 4) - offset;
          }
        }
        const float scale = fp16_to_fp32(load_u16(blk)) * xd[b];
        for (int k = 0; k < 8; ++k) {
          int sum = 0;
          for (int j = 4 * k; j < 4 * k + 4; ++j) sum += wq[j] * xq[j];
          lane[k] = std::fma(static_cast<float>(sum), scale, lane[k]);
        }
        if constexpr (kKind == Kind::Q4_1) {
          m_terms = std::fma(fp16_to_fp32(load_u16(blk + offsetof(BlockQ4_1, m))), a.s[b * a.s_stride + t], m_terms);
        }
      }
      job.y[t * w.rows + r] = ggml_hsum8(lane) + m_terms;
    }
  }
}

// The reference quantizer writes s contiguously; the kernels want it block-major.
constexpr int64_t kMaxBlocksPerCall = 64;

void quantize_q8_1_strided(const float* x, int64_t n, int8_t* qs, float* d, float* s, int64_t s_stride) {
  float s_block[kMaxBlocksPerCall];
  for (int64_t at = 0; at < n; at += kMaxBlocksPerCall * kQK) {
    const int64_t len = std::min<int64_t>(n - at, kMaxBlocksPerCall * kQK);
    quantize_row_q8_1_ref(x + at, len, qs + at, d + at / kQK, s_block);
    for (int64_t b = 0; b < len / kQK; ++b) s[(at / kQK + b) * s_stride] = s_block[b];
  }
}

}  // namespace

void tile_q6_k_portable(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightView& w = *job.w;
  const Activations& a = *job.act;
  const int64_t n_tokens = t1 - t0;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + static_cast<size_t>(r) * job.row_bytes;
    float sums[kMaxTileTokens] = {};
    for (int64_t b = 0; b < a.n_blocks; ++b) {
      const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ6K);
      const uint8_t* ql = blk + offsetof(BlockQ6K, ql);
      const uint8_t* qh = blk + offsetof(BlockQ6K, qh);
      const auto* scales = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6K, scales));
      const float dw = fp16_to_fp32(load_u16(blk + offsetof(BlockQ6K, d)));
      // Unpack once per block for all tokens: q6 − 32 in element order (see dequantize_row).
      int8_t q[kQKK];
      for (int half = 0; half < 2; ++half) {
        const uint8_t* l = ql + 64 * half;
        const uint8_t* h = qh + 32 * half;
        int8_t* out = q + 128 * half;
        for (int j = 0; j < 32; ++j) {
          out[j] = static_cast<int8_t>(((l[j] & 0xf) | ((h[j] & 3) << 4)) - 32);
          out[j + 32] = static_cast<int8_t>(((l[j + 32] & 0xf) | (((h[j] >> 2) & 3) << 4)) - 32);
          out[j + 64] = static_cast<int8_t>(((l[j] >> 4) | (((h[j] >> 4) & 3) << 4)) - 32);
          out[j + 96] = static_cast<int8_t>(((l[j + 32] >> 4) | (((h[j] >> 6) & 3) << 4)) - 32);
        }
      }
      for (int64_t t = 0; t < n_tokens; ++t) {
        const int8_t* xq = a.qs + (t0 + t) * a.q_stride + b * kQKK;
        int32_t isum = 0;
        for (int g = 0; g < kQKK / 16; ++g) {
          int32_t group = 0;
          for (int j = 0; j < 16; ++j) group += q[16 * g + j] * xq[16 * g + j];
          isum += scales[g] * group;
        }
        sums[t] += dw * a.d[(t0 + t) * a.n_blocks + b] * static_cast<float>(isum);
      }
    }
    for (int64_t t = 0; t < n_tokens; ++t) job.y[(t0 + t) * w.rows + r] = sums[t];
  }
}

const KernelSet& kernels_scalar() {
  static const KernelSet set{
      "scalar",
      &quantize_row_q8_0_ref,
      &quantize_q8_1_strided,
      &tile_float<f32_at>,
      &tile_float<f16_at>,
      &tile_float<bf16_at>,
      &tile_q32<Kind::Q4_0>,
      &tile_q32<Kind::Q4_1>,
      &tile_q32<Kind::Q8_0>,
      &tile_q6_k_portable,
  };
  return set;
}

}  // namespace vigil::kernels
