// The AVX2 (+FMA, F16C) matmul path: u8·s8 block products with vpmaddubsw + vpmaddwd.
#include "kernels/cpu/matmul_simd.h"

namespace vigil::kernels {
namespace {

struct Avx2 {
  // 16 ymm registers: 2 rows × 4 tokens keeps the 8 accumulators and the operands in registers.
  static constexpr int kRows = 2;
  static constexpr int kTokens = 4;
  // Four decode rows, as the AVX-512 path: 4 accumulators, 4 sums, the operands: 16 registers.
  static constexpr int kGemvRows = 4;

  // maddubs cannot saturate here: u8 ≤ 15 (nibbles) or ≤ 128 (|Q8_0|) times |s8| ≤ 127, twice.
  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  // The 16 bytes in both halves by the load itself, the upper half's shifted copy blended in (a
  // blend, unlike vinserti128, is not limited to Intel's port 5).
  static __m256i nibbles(const uint8_t* qs) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return _mm256_and_si256(_mm256_blend_epi32(both, _mm256_srli_epi16(both, 4), 0xF0), _mm256_set1_epi8(0x0f));
  }
  // Signed × signed through the unsigned multiply: |w| · (x with w's sign). |−128| = 128 fits u8.
  struct Q8Row {
    __m256i abs, sign;
  };
  static Q8Row q8_row(__m256i w) { return {_mm256_sign_epi8(w, w), w}; }
  static __m256i q8_act(__m256i x) { return x; }
  static __m256i q8_dot(const Q8Row& w, __m256i x) {
    return dot_u8s8(_mm256_setzero_si256(), w.abs, _mm256_sign_epi8(x, w.sign));
  }
};

}  // namespace

const KernelSet& kernels_avx2() {
  static const KernelSet set = make_kernel_set<Avx2>("avx2");
  return set;
}

}  // namespace vigil::kernels
