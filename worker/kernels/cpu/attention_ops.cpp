// Inner loops of attention over the f16 KV cache, SIMD-dispatched like the matmul kernels.
//
// Each variant is compiled for its ISA with a target attribute, so this file needs no special
// flags; the variant is picked once from cpu_kernel_path().
#include "kernels/cpu/attention_ops.h"

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics use deliberately undefined "__Y" operands and trip its own
// -Wuninitialized (GCC bug 105593); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/cpu/fp16.h"
#include "kernels/cpu/matmul.h"

namespace vigil {
namespace {

float dot_scalar(const float* a, const uint16_t* b, int n) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += a[i] * fp16_to_fp32(b[i]);
  return sum;
}

void axpy_scalar(float w, const uint16_t* v, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] += w * fp16_to_fp32(v[i]);
}

__attribute__((target("avx2,fma,f16c"))) float dot_avx2(const float* a, const uint16_t* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + 8)));
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), b1, acc1);
  }
  __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma,f16c"))) void axpy_avx2(float w, const uint16_t* v, float* out, int n) {
  const __m256 wv = _mm256_set1_ps(w);
  for (int i = 0; i < n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(wv, x, _mm256_loadu_ps(out + i)));
  }
}

__attribute__((target("avx512f"))) float dot_avx512(const float* a, const uint16_t* b, int n) {
  __m512 acc = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    __m512 bv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), bv, acc);
  }
  return _mm512_reduce_add_ps(acc);
}

__attribute__((target("avx512f"))) void axpy_avx512(float w, const uint16_t* v, float* out, int n) {
  const __m512 wv = _mm512_set1_ps(w);
  for (int i = 0; i < n; i += 16) {
    __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)));
    _mm512_storeu_ps(out + i, _mm512_fmadd_ps(wv, x, _mm512_loadu_ps(out + i)));
  }
}

struct AttentionOps {
  float (*dot)(const float*, const uint16_t*, int);
  void (*axpy)(float, const uint16_t*, float*, int);
};

AttentionOps select_ops() {
  const std::string_view path = cpu_kernel_path();
  if (path.starts_with("avx512")) return {dot_avx512, axpy_avx512};
  if (path == "avx2") return {dot_avx2, axpy_avx2};
  return {dot_scalar, axpy_scalar};
}

const AttentionOps& ops() {
  static const AttentionOps selected = select_ops();
  return selected;
}

}  // namespace

float dot_f32_f16(const float* a, const uint16_t* b, int n) { return ops().dot(a, b, n); }
void axpy_f16(float w, const uint16_t* v, float* out, int n) { ops().axpy(w, v, out, n); }

}  // namespace vigil
