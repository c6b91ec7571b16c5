// Reference quantization: activation quantizers and row dequantization.
#include "kernels/cpu/quants.h"

#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace vigil {
namespace {

// The largest |x| of a block and whether the block holds NaN or ±Inf (a NaN compares false with
// everything, so a plain max would skip it).
struct BlockRange {
  float amax = 0.0f;
  bool finite = true;
};
BlockRange block_range(const float* x, int n) {
  BlockRange r;
  for (int j = 0; j < n; ++j) {
    const float ax = std::fabs(x[j]);
    if (!(ax <= FLT_MAX)) r.finite = false;
    if (ax > r.amax) r.amax = ax;
  }
  return r;
}

int8_t saturate_q8(float v) {  // v is finite here; the clamp is the defined behaviour, not a hope
  const float r = std::nearbyint(v);
  return static_cast<int8_t>(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r));
}

// Shared by Q8_0 and Q8_1: quantizes one block of 32, returns Σq; d_out gets the fp16-rounded d
// and d_unrounded the float d that ggml multiplies Σq by for Q8_1's s.
int quantize_block_q8(const float* x, int8_t* qs, float* d_out, float* d_unrounded) {
  const BlockRange range = block_range(x, kQK);
  if (!range.finite) {
    std::memset(qs, 0, kQK);
    *d_out = *d_unrounded = std::nanf("");
    return 0;
  }
  const float d = range.amax / 127.0f;
  *d_unrounded = d;
  *d_out = fp16_to_fp32(fp32_to_fp16(d));
  const float id = range.amax != 0.0f ? 127.0f / range.amax : 0.0f;
  if (!(id <= FLT_MAX)) {  // amax so small that 127/amax overflows: d rounds to 0 in fp16 anyway
    std::memset(qs, 0, kQK);
    return 0;
  }
  int sum = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j] = saturate_q8(x[j] * id);
    sum += qs[j];
  }
  return sum;
}

}  // namespace

void quantize_row_q8_0_ref(const float* x, int64_t n, int8_t* qs, float* d) {
  float unused;
  for (int64_t b = 0; b < n / kQK; ++b) quantize_block_q8(x + b * kQK, qs + b * kQK, &d[b], &unused);
}

void quantize_row_q8_1_ref(const float* x, int64_t n, int8_t* qs, float* d, float* s) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    float d_unrounded;
    const int sum = quantize_block_q8(x + b * kQK, qs + b * kQK, &d[b], &d_unrounded);
    s[b] = fp16_to_fp32(fp32_to_fp16(d_unrounded * static_cast<float>(sum)));
  }
}

const float* fp16_to_fp32_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16_to_fp32(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

void quantize_row_q8_K_ref(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK, qs += kQKK, bsums += kQKK / 16) {
    // ggml scales by the signed value of largest magnitude (first one on ties).
    float max = 0.0f, amax = 0.0f;
    bool finite = true;
    for (int j = 0; j < kQKK; ++j) {
      const float ax = std::fabs(x[j]);
      if (!(ax <= FLT_MAX)) finite = false;
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    std::memset(bsums, 0, kQKK / 16 * sizeof(int16_t));
    std::memset(qs, 0, kQKK);
    if (!finite) {
      d[b] = std::nanf("");
      continue;
    }
    if (amax == 0.0f) {
      d[b] = 0.0f;
      continue;
    }
    const float iscale = -127.0f / max;
    d[b] = 1.0f / iscale;
    if (!(std::fabs(iscale) <= FLT_MAX)) continue;  // tiny block: quants stay 0, d is ±0
    for (int j = 0; j < kQKK; ++j) {
      qs[j] = saturate_q8(iscale * x[j]);
      bsums[j / 16] = static_cast<int16_t>(bsums[j / 16] + qs[j]);
    }
  }
}

void dequantize_row(GgmlType type, const uint8_t* row, int64_t n, float* out) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(load_u16(row + 2 * i));
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_fp32(load_u16(row + 2 * i));
      return;
    case GgmlType::Q4_0:
      for (int64_t b = 0; b < n / kQK; ++b, row += sizeof(BlockQ4_0), out += kQK) {
        const float d = fp16_to_fp32(load_u16(row + offsetof(BlockQ4_0, d)));
        const uint8_t* qs = row + offsetof(BlockQ4_0, qs);
        for (int j = 0; j < kQK / 2; ++j) {
          out[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
          out[j + kQK / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
        }
      }
      return;
    case GgmlType::Q4_1:
      for (int64_t b = 0; b < n / kQK; ++b, row += sizeof(BlockQ4_1), out += kQK) {
        const float d = fp16_to_fp32(load_u16(row + offsetof(BlockQ4_1, d)));
        const float m = fp16_to_fp32(load_u16(row + offsetof(BlockQ4_1, m)));
        const uint8_t* qs = row + offsetof(BlockQ4_1, qs);
        for (int j = 0; j < kQK / 2; ++j) {
          out[j] = d * static_cast<float>(qs[j] & 0x0f) + m;
          out[j + kQK / 2] = d * static_cast<float>(qs[j] >> 4) + m;
        }
      }
      return;
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < n / kQK; ++b, row += sizeof(BlockQ8_0), out += kQK) {
        const float d = fp16_to_fp32(load_u16(row + offsetof(BlockQ8_0, d)));
        const auto* qs = reinterpret_cast<const int8_t*>(row + offsetof(BlockQ8_0, qs));
        for (int j = 0; j < kQK; ++j) out[j] = d * static_cast<float>(qs[j]);
      }
      return;
    case GgmlType::Q6_K:
      for (int64_t b = 0; b < n / kQKK; ++b, row += sizeof(BlockQ6K)) {
        const float d = fp16_to_fp32(load_u16(row + offsetof(BlockQ6K, d)));
        const uint8_t* ql = row + offsetof(BlockQ6K, ql);
        const uint8_t* qh = row + offsetof(BlockQ6K, qh);
        const auto* sc = reinterpret_cast<const int8_t*>(row + offsetof(BlockQ6K, scales));
        // Same evaluation order as ggml ((d·scale)·q) so embeddings read the same floats.
        // Each half of 128 elements: four runs of 32 sharing ql (low/high nibble of two 32-byte
        // halves) and qh (2-bit fields 0..3 of the same 32 bytes).
        for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, out += 128) {
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
            out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
            out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
            out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
          }
        }
      }
      return;
    default:
      throw std::invalid_argument("dequantize_row: unsupported type (ggml type id " +
                                  std::to_string(static_cast<uint32_t>(type)) + ")");
  }
}

}  // namespace vigil
