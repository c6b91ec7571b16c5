// Vector operations of the forward pass besides matmul (attention over the f16 KV cache, softmax,
// SwiGLU, RoPE), SIMD-dispatched like the matmul kernels and ordered like ggml's so results match
// llama.cpp's AVX-512 build bit for bit on every path.
//
// Each variant is compiled for its ISA with a target attribute, so this file needs no special
// flags; the variant is picked once from cpu_kernel_path(). The exponential is the polynomial
// ggml uses (ARM's optimized-routines expf: 1.45 ulp + 0.5), on AVX-512 sixteen lanes at a time
// and elsewhere one lane at a time with the same operations, so on every path softmax and SiLU
// round exactly as llama.cpp's AVX-512 build.
#include "kernels/cpu/attention_ops.h"

#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/fp16.h"
#include "kernels/cpu/matmul.h"

// GCC 12's AVX-512 intrinsics use deliberately undefined "__Y" operands and trip its own
// -Wuninitialized (GCC bug 105593); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace vigil {
namespace {

// The order of _mm512_reduce_add_ps as GCC implements it: halves, quarters, then pairs.
float reduce16(const float* v) {
  float t8[8], t4[4];
  for (int i = 0; i < 8; ++i) t8[i] = v[8 + i] + v[i];
  for (int i = 0; i < 4; ++i) t4[i] = t8[4 + i] + t8[i];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

float dot_scalar(const float* a, const uint16_t* b, int n) {
  float lanes[16] = {};
  for (int i = 0; i < n; ++i) lanes[i % 16] = std::fma(a[i], fp16_to_fp32(b[i]), lanes[i % 16]);
  return reduce16(lanes);
}

// ggml's vector dot: four 16-lane accumulators over 64-element steps, combined (0+2) + (1+3),
// then reduced; a tail past the last whole step is added in double.
float dot4_scalar(const float* a, const uint16_t* b, int n) {
  float acc[4][16] = {};
  const int whole = n / 64 * 64;
  for (int i = 0; i < whole; i += 64)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 16; ++l)
        acc[j][l] = std::fma(fp16_to_fp32(b[i + j * 16 + l]), a[i + j * 16 + l], acc[j][l]);
  float combined[16];
  for (int l = 0; l < 16; ++l) combined[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  double sum = static_cast<double>(reduce16(combined));
  for (int i = whole; i < n; ++i) sum += static_cast<double>(a[i] * fp16_to_fp32(b[i]));
  return static_cast<float>(sum);
}

void dot_rows_scalar(const float* a, const uint16_t* k, size_t stride, int rows, int n, float scale, float* out) {
  for (int j = 0; j < rows; ++j, k += stride) out[j] = dot_scalar(a, k, n) * scale;
}
void dot4_rows_scalar(const float* a, const uint16_t* k, size_t stride, int rows, int n, float scale, float* out) {
  for (int j = 0; j < rows; ++j, k += stride) out[j] = dot4_scalar(a, k, n) * scale;
}

// Outputs [from, n) of reduce_lane_groups / reduce_lanes.
void reduce_lane_groups_scalar(const float* lanes, int n, float* out, int from = 0) {
  const size_t group = 16 * static_cast<size_t>(n);
  float column[16];
  for (int d = from; d < n; ++d) {
    for (int l = 0; l < 16; ++l) {
      const size_t at = static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(d);
      column[l] = (lanes[at] + lanes[2 * group + at]) + (lanes[group + at] + lanes[3 * group + at]);
    }
    out[d] = reduce16(column);
  }
}

void reduce_lanes_scalar(const float* lanes, int n, float* out, int from = 0) {
  float column[16];
  for (int d = from; d < n; ++d) {
    for (int l = 0; l < 16; ++l) column[l] = lanes[static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(d)];
    out[d] = reduce16(column);
  }
}

void round_to_fp16_scalar(const float* x, float scale, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i] * scale));
}

void axpy_scalar(float w, const uint16_t* v, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = std::fma(w, fp16_to_fp32(v[i]), out[i]);
}

// exp16 below for one lane, operation for operation (fnmadd(a, b, c) is fma(−a, b, c)), so every
// path rounds softmax and SiLU exactly as llama.cpp's AVX-512 build. scalef(poly, n) is done as two
// multiplications by powers of two: the first (|n/2| <= 96) is exact, the second rounds once, as
// scalef does, subnormal results included.
__attribute__((always_inline)) inline float exp_poly(float x) {
  const float shifter = 0x1.8p23f;
  const float n = std::fma(x, 0x1.715476p+0f, shifter) - shifter;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  const float b2 = b * b;
  const float high = std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), b2, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
  const float poly = std::fma(high, b2, std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (n != n) return poly;  // NaN in, NaN out
  const int e = static_cast<int>(n), e1 = e / 2;
  auto pow2 = [](int k) { return std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23); };
  return poly * pow2(e1) * pow2(e - e1);
}

// As exp_and_sum_avx512: whole 16-element chunks through the polynomial, each chunk's sum in the
// order of _mm512_reduce_add_ps added in double; a tail (callers pass none) through libm.
__attribute__((always_inline)) inline double exp_and_sum_body(float* x, int n, float max) {
  double sum = 0.0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) x[i + l] = exp_poly(x[i + l] - max);
    sum += static_cast<double>(reduce16(x + i));
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  return sum;
}

__attribute__((always_inline)) inline void swiglu_body(float* gate, const float* up, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = i; l < i + 16; ++l) gate[l] = gate[l] / (1.0f + exp_poly(0.0f - gate[l])) * up[l];
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

double exp_and_sum_scalar(float* x, int n, float max) { return exp_and_sum_body(x, n, max); }
void swiglu_scalar(float* gate, const float* up, int n) { swiglu_body(gate, up, n); }
// The same code where std::fma is an instruction rather than a libm call.
__attribute__((target("avx2,fma"))) double exp_and_sum_fma(float* x, int n, float max) {
  return exp_and_sum_body(x, n, max);
}
__attribute__((target("avx2,fma"))) void swiglu_fma(float* gate, const float* up, int n) { swiglu_body(gate, up, n); }

// std::fma is exact on every path; where the CPU has FMA it is one instruction instead of a libm call.
void rope_scalar(float* head, int head_dim, const float* cos, const float* sin) {
  for (int i = 0; i < head_dim / 2; ++i) {
    const float x0 = head[2 * i], x1 = head[2 * i + 1];
    head[2 * i] = std::fma(x0, cos[i], -(x1 * sin[i]));
    head[2 * i + 1] = std::fma(x0, sin[i], x1 * cos[i]);
  }
}

__attribute__((target("fma"))) void rope_fma(float* head, int head_dim, const float* cos, const float* sin) {
  for (int i = 0; i < head_dim / 2; ++i) {
    const float x0 = head[2 * i], x1 = head[2 * i + 1];
    head[2 * i] = std::fma(x0, cos[i], -(x1 * sin[i]));
    head[2 * i + 1] = std::fma(x0, sin[i], x1 * cos[i]);
  }
}

__attribute__((target("avx2,fma,f16c"))) void axpy_avx2(float w, const uint16_t* v, float* out, int n) {
  const __m256 wv = _mm256_set1_ps(w);
  for (int i = 0; i < n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(wv, x, _mm256_loadu_ps(out + i)));
  }
}

// F16C rounds to nearest even, as fp32_to_fp16 (NaN stays NaN; its payload may differ).
__attribute__((target("avx2,f16c"))) void round_to_fp16_f16c(const float* x, float scale, float* out, int n) {
  const __m256 s = _mm256_set1_ps(scale);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  round_to_fp16_scalar(x + i, scale, out + i, n - i);
}

// ggml's 16-lane accumulators as two 8-lane halves: lane for lane the same fused multiply-adds
// as the AVX-512 build, reduced in registers in _mm512_reduce_add_ps's order (halves, quarters,
// pairs; IEEE addition commutes, so only the grouping matters). 256-bit vectors on purpose: the
// same instructions run at full rate on Zen 4 (which splits 512-bit ones in two) and keep Intel
// cores off port 5's 512-bit shuffles and out of the AVX-512 frequency licence, and the score
// reduction stays in registers: the 16 lanes stored and summed one by one cost more than the
// products themselves (docs/performance.md, "Decode on Intel").
struct Lanes16 {
  __m256 lo, hi;
};

__attribute__((target("avx2,fma,f16c"), always_inline)) inline float reduce16(Lanes16 v) {
  const __m256 t8 = _mm256_add_ps(v.lo, v.hi);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));  // t4[0]+t4[2], t4[1]+t4[3]
  return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

__attribute__((target("avx2,fma,f16c"), always_inline)) inline Lanes16 fma16(const float* a, const uint16_t* b,
                                                                               Lanes16 acc) {
  const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  const __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 8)));
  return {_mm256_fmadd_ps(b0, _mm256_loadu_ps(a), acc.lo), _mm256_fmadd_ps(b1, _mm256_loadu_ps(a + 8), acc.hi)};
}

__attribute__((target("avx2,fma,f16c"))) void dot_rows_avx2(const float* a, const uint16_t* k, size_t stride,
                                                          int rows, int n, float scale, float* out) {
  for (int j = 0; j < rows; ++j, k += stride) {
    Lanes16 acc{_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n; i += 16) acc = fma16(a + i, k + i, acc);
    out[j] = reduce16(acc) * scale;
  }
}

__attribute__((target("avx2,fma,f16c"))) void dot4_rows_avx2(const float* a, const uint16_t* k, size_t stride,
                                                           int rows, int n, float scale, float* out) {
  const int whole = n / 64 * 64;
  for (int j = 0; j < rows; ++j, k += stride) {
    const __m256 zero = _mm256_setzero_ps();
    Lanes16 acc[4] = {{zero, zero}, {zero, zero}, {zero, zero}, {zero, zero}};
    for (int i = 0; i < whole; i += 64)
      for (int g = 0; g < 4; ++g) acc[g] = fma16(a + i + 16 * g, k + i + 16 * g, acc[g]);
    const Lanes16 combined{_mm256_add_ps(_mm256_add_ps(acc[0].lo, acc[2].lo), _mm256_add_ps(acc[1].lo, acc[3].lo)),
                           _mm256_add_ps(_mm256_add_ps(acc[0].hi, acc[2].hi), _mm256_add_ps(acc[1].hi, acc[3].hi))};
    double sum = static_cast<double>(reduce16(combined));
    for (int i = whole; i < n; ++i) sum += static_cast<double>(a[i] * _cvtsh_ss(k[i]));
    out[j] = static_cast<float>(sum) * scale;
  }
}

// reduce_lane_groups / reduce_lanes with the output index d in the vector lanes: each output's
// additions are the scalar version's, eight outputs at a time.
__attribute__((target("avx2"))) void reduce_lane_groups_avx2(const float* lanes, int n, float* out) {
  const size_t group = 16 * static_cast<size_t>(n);
  int d = 0;
  for (; d + 8 <= n; d += 8) {
    __m256 c[16];
    for (int l = 0; l < 16; ++l) {
      const float* at = lanes + static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(d);
      c[l] = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(at), _mm256_loadu_ps(at + 2 * group)),
                           _mm256_add_ps(_mm256_loadu_ps(at + group), _mm256_loadu_ps(at + 3 * group)));
    }
    for (int l = 0; l < 8; ++l) c[l] = _mm256_add_ps(c[l + 8], c[l]);
    for (int l = 0; l < 4; ++l) c[l] = _mm256_add_ps(c[l + 4], c[l]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3])));
  }
  if (d < n) reduce_lane_groups_scalar(lanes, n, out, d);
}

__attribute__((target("avx2"))) void reduce_lanes_avx2(const float* lanes, int n, float* out) {
  int d = 0;
  for (; d + 8 <= n; d += 8) {
    __m256 c[16];
    for (int l = 0; l < 16; ++l) c[l] = _mm256_loadu_ps(lanes + static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(d));
    for (int l = 0; l < 8; ++l) c[l] = _mm256_add_ps(c[l + 8], c[l]);
    for (int l = 0; l < 4; ++l) c[l] = _mm256_add_ps(c[l + 4], c[l]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3])));
  }
  if (d < n) reduce_lanes_scalar(lanes, n, out, d);
}

__attribute__((target("avx512f"))) void axpy_avx512(float w, const uint16_t* v, float* out, int n) {
  const __m512 wv = _mm512_set1_ps(w);
  for (int i = 0; i < n; i += 16) {
    __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)));
    _mm512_storeu_ps(out + i, _mm512_fmadd_ps(wv, x, _mm512_loadu_ps(out + i)));
  }
}

// exp(x) for 16 lanes: x = n·ln2 + b with n = round(x / ln2), exp(b) by a degree-5 polynomial,
// scaled by 2^n; |n| > 192 saturates to 0 or +inf.
__attribute__((target("avx512f,avx512dq"))) __m512 exp16(__m512 x) {
  const __m512 shifter = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shifter);
  const __m512 n = _mm512_sub_ps(z, shifter);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __mmask16 out_of_range = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
  const __m512 b2 = _mm512_mul_ps(b, b);
  const __m512 high = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)),
                                      b2, _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f)));
  const __m512 poly = _mm512_fmadd_ps(high, b2, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 result = _mm512_scalef_ps(poly, n);
  if (!out_of_range) return result;
  const __m512 zero = _mm512_setzero_ps();
  const __m512 saturated = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ), _mm512_set1_ps(INFINITY), zero);
  return _mm512_mask_blend_ps(out_of_range, result, saturated);
}

__attribute__((target("avx512f,avx512dq"))) double exp_and_sum_avx512(float* x, int n, float max) {
  double sum = 0.0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(max)));
    _mm512_storeu_ps(x + i, e);
    sum += static_cast<double>(_mm512_reduce_add_ps(e));
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  return sum;
}

__attribute__((target("avx512f,avx512dq"))) void swiglu_avx512(float* gate, const float* up, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_storeu_ps(gate + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

using RowsFn = void (*)(const float*, const uint16_t*, size_t, int, int, float, float*);

struct VectorOps {
  RowsFn dot_rows, dot4_rows;
  void (*axpy)(float, const uint16_t*, float*, int);
  double (*exp_and_sum)(float*, int, float);
  void (*swiglu)(float*, const float*, int);
  void (*rope)(float*, int, const float*, const float*);
  void (*reduce_lane_groups)(const float*, int, float*);
  void (*reduce_lanes)(const float*, int, float*);
  void (*round_to_fp16)(const float*, float, float*, int);
};

VectorOps select_ops() {
  const std::string_view path = cpu_kernel_path();
  if (path.starts_with("avx512"))
    return {dot_rows_avx2,   dot4_rows_avx2, axpy_avx512,      exp_and_sum_avx512, swiglu_avx512,
            rope_fma,        reduce_lane_groups_avx2, reduce_lanes_avx2, round_to_fp16_f16c};
  if (path == "avx2")
    return {dot_rows_avx2, dot4_rows_avx2, axpy_avx2, exp_and_sum_fma, swiglu_fma,
            rope_fma,      reduce_lane_groups_avx2, reduce_lanes_avx2, round_to_fp16_f16c};
  return {dot_rows_scalar,    dot4_rows_scalar, axpy_scalar,
          exp_and_sum_scalar, swiglu_scalar,    rope_scalar,
          [](const float* l, int n, float* o) { reduce_lane_groups_scalar(l, n, o); },
          [](const float* l, int n, float* o) { reduce_lanes_scalar(l, n, o); },
          round_to_fp16_scalar};
}

const VectorOps& ops() {
  static const VectorOps selected = select_ops();
  return selected;
}

}  // namespace

void dot_rows_f16(const float* a, const uint16_t* k, size_t stride, int rows, int n, float scale, float* out) {
  ops().dot_rows(a, k, stride, rows, n, scale, out);
}
void dot_rows_f16_4acc(const float* a, const uint16_t* k, size_t stride, int rows, int n, float scale, float* out) {
  ops().dot4_rows(a, k, stride, rows, n, scale, out);
}
void axpy_f16(float w, const uint16_t* v, float* out, int n) { ops().axpy(w, v, out, n); }
double exp_and_sum(float* x, int n, float max) { return ops().exp_and_sum(x, n, max); }
void swiglu_row(float* gate, const float* up, int n) { ops().swiglu(gate, up, n); }
void rope_pairs(float* head, int head_dim, const float* cos, const float* sin) {
  ops().rope(head, head_dim, cos, sin);
}
void reduce_lane_groups(const float* lanes, int n, float* out) { ops().reduce_lane_groups(lanes, n, out); }
void reduce_lanes(const float* lanes, int n, float* out) { ops().reduce_lanes(lanes, n, out); }
void round_to_fp16(const float* x, float scale, float* out, int n) { ops().round_to_fp16(x, scale, out, n); }

}  // namespace vigil
