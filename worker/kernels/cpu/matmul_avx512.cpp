// The AVX-512 VNNI matmul path: u8·s8 block products in one vpdpbusd, 32 registers for the tiles.
#include "kernels/cpu/matmul_simd.h"

namespace vigil::kernels {
namespace {

struct Avx512Vnni {
  // 32 ymm registers (AVX-512VL): 4 rows × 4 tokens = 16 accumulators plus the operands.
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;
  // Four rows per decode call: four independent accumulator chains cover the multiply-add latency
  // on Zen 4 (measured faster than two at 1 thread, the same at 2).
  static constexpr int kGemvRows = 4;

  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  // The 16 bytes in both halves by the load itself, the upper half shifted under a mask: two
  // instructions and no cross-lane shuffle.
  static __m256i nibbles(const uint8_t* qs) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return _mm256_and_si256(_mm256_mask_srli_epi16(both, 0xFF00, both, 4), _mm256_set1_epi8(0x0f));
  }
  // Signed × signed: feed x + 128 as the unsigned operand and start the sum at −128·Σw, which is
  // computed once per weight block instead of once per token.
  struct Q8Row {
    __m256i w, bias;
  };
  static Q8Row q8_row(__m256i w) {
    const __m256i zero = _mm256_setzero_si256();
    return {w, _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(-128), w))};
  }
  static __m256i q8_act(__m256i x) { return _mm256_xor_si256(x, _mm256_set1_epi8(-128)); }
  static __m256i q8_dot(const Q8Row& w, __m256i x_plus_128) {
    return _mm256_dpbusd_epi32(w.bias, x_plus_128, w.w);
  }
};

}  // namespace

const KernelSet& kernels_avx512_vnni() {
  static const KernelSet set = make_kernel_set<Avx512Vnni>("avx512-vnni");
  return set;
}

}  // namespace vigil::kernels
