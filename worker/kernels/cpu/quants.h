// GGML block layouts and the reference (scalar) quantizers of activations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/fp16.h"  // fp16/bf16 conversion (round to nearest even, as F16C)

namespace vigil {

// Block layouts exactly as ggml stores them (ggml-common.h). Kernels read blocks through byte
// offsets (the mapped file gives no alignment or object-lifetime guarantee); the structs document
// the layout and give the offsets.
inline constexpr int kQK = 32;    // elements per block of the Q4_0/Q4_1/Q8_0/Q8_1 families
inline constexpr int kQKK = 256;  // elements per super-block of the K-quants

struct BlockQ4_0 {    // x = d·(n − 8); element j in the low nibble of qs[j], j+16 in the high one
  uint16_t d;         // fp16
  uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {    // x = d·n + m, same nibble order as Q4_0
  uint16_t d, m;      // fp16
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {    // x = d·q
  uint16_t d;         // fp16
  int8_t qs[kQK];
};
struct BlockQ8_1 {    // x = d·q; s = d·Σq (both fp16), what Q4_1 dots need for the m term
  uint16_t d, s;
  int8_t qs[kQK];
};
struct BlockQ6K {     // x = d·scales[i/16]·(q6 − 32); q6 = 4 low bits in ql, 2 high bits in qh
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;         // fp16
};
struct BlockQ8K {     // x = d·q with float d; bsums[i] = Σ of q over elements 16i..16i+15
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36 && sizeof(BlockQ6K) == 210 && sizeof(BlockQ8K) == 292);

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// fp16_to_fp32 of every half, indexed by its bits (256 KiB, filled on first use). The decode
// kernels convert block scales with it, as ggml's ggml_table_f32_f16: two loads instead of an
// F16C conversion, which on Intel cores takes a port-5 slot (docs/performance.md, "Decode on
// Intel").
const float* fp16_to_fp32_table();


// Activation quantizers, mirroring ggml's x86 quantize_row_q8_0 / q8_1 and quantize_row_q8_K_ref,
// with two deliberate definitions where ggml has none:
//  - every quant saturates to [-127, 127] (ggml relies on the arithmetic never leaving it);
//  - a block holding NaN or ±Inf gets d = NaN (and s = NaN), all quants 0: every output computed
//    from that token becomes NaN instead of depending on how a CPU converts NaN to an integer.
//  - a block so small that 127/amax overflows (amax < ~7.5e-37) quantizes to all zeros.
// Finite blocks with amax above 65504·127 overflow the fp16 scale to Inf, exactly as in ggml.
// Outputs are split into arrays (the kernels' layout): qs[n], d[n/32] (the fp16-rounded scale as a
// float) and, for Q8_1, s[n/32] (fp16-rounded d·Σq).
void quantize_row_q8_0_ref(const float* x, int64_t n, int8_t* qs, float* d);
void quantize_row_q8_1_ref(const float* x, int64_t n, int8_t* qs, float* d, float* s);
// Q8_K (blocks of 256, float d, sums per 16) as ggml's quantize_row_q8_K_ref.
void quantize_row_q8_K_ref(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);

}  // namespace vigil
