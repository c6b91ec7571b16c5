// x86 SIMD matmul kernels as templates over an ISA policy; included only by the per-ISA files.
//
// Everything here has internal linkage (anonymous namespace): each per-ISA translation unit gets
// its own copy compiled with its own -m flags, so no AVX-512 code can leak into the AVX2 path
// through the linker merging inline functions.
//
// An ISA policy provides:
//   kRows, kTokens        micro-tile shape (weight rows × tokens sharing each loaded block)
//   dot_u8s8(acc, u, s)   acc + Σ of 4 adjacent u8·s8 products per int32 lane
//   nibbles(qs)           16 bytes of nibbles → 32 bytes in element order: low nibbles (elements
//                         0..15), then high
//   kGemvRows             weight rows one decode (single-token) call interleaves
//   Q8Row, q8_row(w)      a signed Q8_0 weight block prepared for q8_dot
//   q8_act(x), q8_dot     the activation side of a Q8_0 × Q8_0 block product
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/quants.h"

namespace vigil::kernels {
namespace {

// ggml's hsum_float_8, operation for operation: (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline float round_fp16(float f) {
  return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// The fp16 at p in all 8 lanes.
inline __m256 broadcast_fp16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(load_u16(p))));
}

// ggml's x86 quantize_row_q8_0/q8_1 (same d, id and rounding), plus the saturation and NaN rules
// of quants.h; bit-identical to quantize_row_q8_{0,1}_ref.
template <bool kWithSum>
void quantize_q8(const float* x, int64_t n, int8_t* qs, float* d, float* s, int64_t s_stride) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 max_finite = _mm256_set1_ps(FLT_MAX);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, qs += kQK) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    int nonfinite = 0;
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      const __m256 a = _mm256_andnot_ps(sign_bit, v[i]);
      nonfinite |= _mm256_movemask_ps(_mm256_cmp_ps(a, max_finite, _CMP_NLE_UQ));
      amax = _mm256_max_ps(amax, a);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float max_abs = _mm_cvtss_f32(m4);
    if (nonfinite) {
      std::memset(qs, 0, kQK);
      d[b] = __builtin_nanf("");
      if constexpr (kWithSum) s[b * s_stride] = __builtin_nanf("");
      continue;
    }
    const float scale = max_abs / 127.0f;
    d[b] = round_fp16(scale);
    const float inverse = max_abs != 0.0f ? 127.0f / max_abs : 0.0f;
    if (!(inverse <= FLT_MAX)) {
      std::memset(qs, 0, kQK);
      if constexpr (kWithSum) s[b * s_stride] = 0.0f;
      continue;
    }
    const __m256 mul = _mm256_set1_ps(inverse);
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
      q[i] = _mm256_cvtps_epi32(r);
    }
    if constexpr (kWithSum) {
      const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]),
                                                _mm256_add_epi32(q[2], q[3])));
      s[b * s_stride] = round_fp16(scale * static_cast<float>(sum));
    }
    // The packs work per 128-bit lane; the permute restores element order.
    const __m256i q01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), bytes);
  }
}

inline void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d) {
  quantize_q8<false>(x, n, qs, d, nullptr, 0);
}
inline void quantize_q8_1(const float* x, int64_t n, int8_t* qs, float* d, float* s, int64_t s_stride) {
  quantize_q8<true>(x, n, qs, d, s, s_stride);
}

enum class Kind { Q4_0, Q4_1, Q8_0 };

// Weight rows are prefetched this many micro-tiles ahead: matrices stream from memory (the model
// is larger than the caches) and the prefetch cut the CPU time of the 49152×576 output head by
// a third over the hardware prefetcher alone.
constexpr size_t kPrefetchTiles = 4;

// One micro-tile of a 32-element-block type: R weight rows × T tokens over all blocks.
// Every (row, token) result is computed exactly as ggml's x86 vec_dot computes it, so the results
// are bit-identical to llama.cpp's (tests/unit/worker/kernels/ggml_parity_test.cpp): 8 lanes of
// exact integer block sums, each fused into its lane accumulator as acc += (d_w·d_x)·Σ in block
// order, then ggml's horizontal sum; Q4_1 adds Σ m·s, accumulated by fused multiply-adds in
// block order, at the end. (That Q8 activation rounding makes the forward pass amplify any last-bit
// difference, so "close" matmuls are not enough to stay token-exact.)
// Q4_1's m·s terms go to one more accumulator per row whose lane t belongs to token t, so they
// cost one multiply-add per row and block instead of one per row, token and block.
template <class Isa, Kind kKind, int R, int T>
void microtile_q32(const uint8_t* const* rows, const Activations& a, int64_t t0, size_t prefetch_ahead,
                   float out[R][T]) {
  static_assert(T <= 8, "Q4_1's m·s lanes hold at most 8 tokens");
  constexpr size_t kBlockBytes = kKind == Kind::Q4_0   ? sizeof(BlockQ4_0)
                                 : kKind == Kind::Q4_1 ? sizeof(BlockQ4_1)
                                                       : sizeof(BlockQ8_0);
  // Everything the loop reads goes into locals first: __m256 is a may-alias type, so with the
  // accumulators in memory GCC would reload every field of `a` after each store.
  const int64_t n_blocks = a.n_blocks;
  const int64_t s_stride = a.s_stride;
  [[maybe_unused]] const float* s_tile = a.s + t0;
  const int8_t* x_token[T];
  const float* dx_token[T];
  for (int t = 0; t < T; ++t) {
    x_token[t] = a.qs + static_cast<size_t>(t0 + t) * static_cast<size_t>(a.q_stride);
    dx_token[t] = a.d + (t0 + t) * n_blocks;
  }
  const uint8_t* row[R];
  for (int r = 0; r < R; ++r) row[r] = rows[r];
  const __m256i zero = _mm256_setzero_si256();
  __m256 acc[R][T];
  [[maybe_unused]] __m256 macc[R];
  for (int r = 0; r < R; ++r) {
    macc[r] = _mm256_setzero_ps();
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i wq[R];
    [[maybe_unused]] typename Isa::Q8Row w8[R];
    __m256 wd[R];
    [[maybe_unused]] __m256 sx;  // Q4_1: s of token t0 + i in lane i (lanes ≥ T are ignored)
    if constexpr (kKind == Kind::Q4_1) sx = _mm256_loadu_ps(s_tile + b * s_stride);
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = row[r] + static_cast<size_t>(b) * kBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk + prefetch_ahead), _MM_HINT_T0);
      if constexpr (kKind == Kind::Q4_1) {
        // d and m are adjacent: one load and one conversion give [d, m, d, m, ...].
        uint32_t dm_bits;
        std::memcpy(&dm_bits, blk, sizeof dm_bits);
        const __m256 dm = _mm256_cvtph_ps(_mm_set1_epi32(static_cast<int>(dm_bits)));
        wd[r] = _mm256_permute_ps(dm, 0x00);
        macc[r] = _mm256_fmadd_ps(_mm256_permute_ps(dm, 0x55), sx, macc[r]);
        wq[r] = Isa::nibbles(blk + offsetof(BlockQ4_1, qs));
      } else if constexpr (kKind == Kind::Q4_0) {
        wd[r] = broadcast_fp16(blk);
        wq[r] = Isa::nibbles(blk + offsetof(BlockQ4_0, qs));
      } else {
        wd[r] = broadcast_fp16(blk);
        w8[r] = Isa::q8_row(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ8_0, qs))));
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_token[t] + b * kQK));
      const __m256 dx = _mm256_broadcast_ss(dx_token[t] + b);
      [[maybe_unused]] __m256i bias;  // Q4_0: −8·Σx per lane turns nibbles n into n − 8
      [[maybe_unused]] __m256i xa;
      if constexpr (kKind == Kind::Q4_0) {
        bias = _mm256_sub_epi32(zero, Isa::dot_u8s8(zero, _mm256_set1_epi8(8), xq));
      }
      if constexpr (kKind == Kind::Q8_0) xa = Isa::q8_act(xq);
      for (int r = 0; r < R; ++r) {
        __m256i isum;
        if constexpr (kKind == Kind::Q4_1) isum = Isa::dot_u8s8(zero, wq[r], xq);
        if constexpr (kKind == Kind::Q4_0) isum = Isa::dot_u8s8(bias, wq[r], xq);
        if constexpr (kKind == Kind::Q8_0) isum = Isa::q8_dot(w8[r], xa);
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(wd[r], dx), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    [[maybe_unused]] alignas(32) float m_terms[8];
    if constexpr (kKind == Kind::Q4_1) _mm256_store_ps(m_terms, macc[r]);
    for (int t = 0; t < T; ++t) {
      out[r][t] = hsum(acc[r][t]);
      if constexpr (kKind == Kind::Q4_1) out[r][t] += m_terms[t];
    }
  }
}

// One token (single-sequence decode): nothing is reused across tokens, so what each weight block
// costs per row is the whole story. The same results as microtile_q32 with T = 1, bit for bit,
// with fewer instructions per block, chosen for the narrowest CPU we run on (Intel: three vector
// ports, port 5 the only one for shuffles and conversions; docs/performance.md, "Decode on
// Intel"):
//  - block scales through fp16_to_fp32_table (loads) instead of F16C conversions, broadcast by
//    the load itself, and d_w·d_x in one multiply;
//  - Q4_1's m·s as ggml sums it, one scalar fused multiply-add per block;
//  - R rows interleaved: each row's accumulator is a chain of dependent multiply-adds (4 cycles
//    each), so one row alone would wait on it; the activation block is loaded once for R rows.
template <class Isa, Kind kKind, int R>
void gemv_q32(const uint8_t* const* rows, const Activations& a, const float* fp16, size_t prefetch_ahead,
              float out[R]) {
  constexpr size_t kBlockBytes = kKind == Kind::Q4_0   ? sizeof(BlockQ4_0)
                                 : kKind == Kind::Q4_1 ? sizeof(BlockQ4_1)
                                                       : sizeof(BlockQ8_0);
  const int64_t n_blocks = a.n_blocks;
  const int64_t s_stride = a.s_stride;
  const int8_t* xq = a.qs;
  const float* dx = a.d;
  [[maybe_unused]] const float* sx = a.s;
  const uint8_t* row[R];
  for (int r = 0; r < R; ++r) row[r] = rows[r];
  const __m256i zero = _mm256_setzero_si256();
  __m256 acc[R];
  [[maybe_unused]] float msum[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    msum[r] = 0.0f;
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * kQK));
    const __m256 dxv = _mm256_broadcast_ss(dx + b);
    [[maybe_unused]] __m256i bias;  // Q4_0: −8·Σx per lane turns nibbles n into n − 8
    [[maybe_unused]] __m256i xa;
    if constexpr (kKind == Kind::Q4_0) bias = _mm256_sub_epi32(zero, Isa::dot_u8s8(zero, _mm256_set1_epi8(8), x));
    if constexpr (kKind == Kind::Q8_0) xa = Isa::q8_act(x);
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = row[r] + static_cast<size_t>(b) * kBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk + prefetch_ahead), _MM_HINT_T0);
      // Q4_1's d and m are adjacent: one load for both.
      uint32_t scales = load_u16(blk);
      if constexpr (kKind == Kind::Q4_1) std::memcpy(&scales, blk, sizeof scales);
      const __m256 dd = _mm256_mul_ps(_mm256_broadcast_ss(fp16 + (scales & 0xffff)), dxv);
      __m256i isum;
      if constexpr (kKind == Kind::Q4_1) {
        msum[r] = std::fma(fp16[scales >> 16], sx[b * s_stride], msum[r]);
        isum = Isa::dot_u8s8(zero, Isa::nibbles(blk + offsetof(BlockQ4_1, qs)), x);
      } else if constexpr (kKind == Kind::Q4_0) {
        isum = Isa::dot_u8s8(bias, Isa::nibbles(blk + offsetof(BlockQ4_0, qs)), x);
      } else {
        const auto w = Isa::q8_row(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ8_0, qs))));
        isum = Isa::q8_dot(w, xa);
      }
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r] = hsum(acc[r]);
    if constexpr (kKind == Kind::Q4_1) out[r] += msum[r];
  }
}

// Rows [r0, r1) of a one-token matmul, R at a time (rows past r1 repeat the last one and are
// dropped). Not inlined: the decode loop keeps a symbol of its own, which bench/loop_mca.py models.
template <class Isa, Kind kKind, int R>
__attribute__((noinline)) void walk_gemv(const TileJob& job, int64_t r0, int64_t r1) {
  const WeightView& w = *job.w;
  const float* fp16 = fp16_to_fp32_table();
  for (int64_t r = r0; r < r1; r += R) {
    const uint8_t* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = w.data + static_cast<size_t>(std::min(r + i, r1 - 1)) * job.row_bytes;
    float out[R];
    gemv_q32<Isa, kKind, R>(rows, *job.act, fp16, kPrefetchTiles * R * job.row_bytes, out);
    for (int i = 0; i < R && r + i < r1; ++i) job.y[r + i] = out[i];
  }
}

// F32 / F16 / BF16 weights: 8 elements at a time converted to float, fused multiply-adds.
enum class FloatKind { F32, F16, BF16 };

template <FloatKind kKind>
inline __m256 load8(const uint8_t* row, int64_t c) {
  if constexpr (kKind == FloatKind::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
    if constexpr (kKind == FloatKind::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}
template <FloatKind kKind>
inline float load1(const uint8_t* row, int64_t c) {
  if constexpr (kKind == FloatKind::F32) {
    float v;
    std::memcpy(&v, row + 4 * c, sizeof v);
    return v;
  } else if constexpr (kKind == FloatKind::F16) {
    return _cvtsh_ss(load_u16(row + 2 * c));
  } else {
    return bf16_to_fp32(load_u16(row + 2 * c));
  }
}

template <FloatKind kKind, int R, int T>
void microtile_float(const uint8_t* const* rows, const Activations& a, int64_t cols, int64_t t0,
                     float out[R][T]) {
  __m256 acc[R][T];
  for (auto& row : acc)
    for (auto& v : row) v = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load8<kKind>(rows[r], c);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(a.f + (t0 + t) * a.f_stride + c);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float sum = hsum(acc[r][t]);
      const float* x = a.f + (t0 + t) * a.f_stride;
      for (int64_t k = c; k < cols; ++k) sum += load1<kKind>(rows[r], k) * x[k];
      out[r][t] = sum;
    }
  }
}

// Walks [r0, r1) × [t0, t1) in micro-tiles. Rows past r1 repeat the last row (their results are
// dropped) so one R serves every matrix; the token count picks an exact-T instantiation because a
// short token tail (decode of 1–3 sequences) is the common case.
template <int R, int TMax, typename Micro>
void walk_tiles(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1, Micro&& micro) {
  const WeightView& w = *job.w;
  for (int64_t r = r0; r < r1; r += R) {
    const uint8_t* rows[R];
    for (int i = 0; i < R; ++i) {
      rows[i] = w.data + static_cast<size_t>(std::min(r + i, r1 - 1)) * job.row_bytes;
    }
    for (int64_t t = t0; t < t1; t += TMax) {
      float out[R][TMax];
      const int n_t = static_cast<int>(std::min<int64_t>(TMax, t1 - t));
      micro(rows, t, n_t, out);
      for (int i = 0; i < R && r + i < r1; ++i) {
        for (int j = 0; j < n_t; ++j) job.y[(t + j) * w.rows + r + i] = out[i][j];
      }
    }
  }
}

// Calls f(std::integral_constant<int, T>) for the runtime n_t in [1, TMax].
template <int TMax, typename F>
void with_token_count(int n_t, F&& f) {
  if constexpr (TMax >= 1) {
    if (n_t == TMax) return f(std::integral_constant<int, TMax>{});
    if constexpr (TMax > 1) with_token_count<TMax - 1>(n_t, f);
  }
}

// Decode (one or two tokens) is bound by streaming weights from memory, and reading one row at a
// time keeps that a single sequential stream (four interleaved rows ran at half the bandwidth on
// Zen 4); larger batches reuse each loaded block across Isa::kRows rows. Both give the same bits.
template <class Isa, Kind kKind, int R>
void walk_q32(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  constexpr int TM = Isa::kTokens;
  walk_tiles<R, TM>(job, r0, r1, t0, t1, [&](const uint8_t* const* rows, int64_t t, int n_t, float (&out)[R][TM]) {
    with_token_count<TM>(n_t, [&](auto tokens) {
      constexpr int T = decltype(tokens)::value;
      float part[R][T];
      microtile_q32<Isa, kKind, R, T>(rows, *job.act, t, kPrefetchTiles * R * job.row_bytes, part);
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) out[i][j] = part[i][j];
    });
  });
}

template <class Isa, Kind kKind>
void tile_q32(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (job.n_tokens == 1) return walk_gemv<Isa, kKind, Isa::kGemvRows>(job, r0, r1);
  if (job.n_tokens <= kDecodeTokens) return walk_q32<Isa, kKind, 1>(job, r0, r1, t0, t1);
  walk_q32<Isa, kKind, Isa::kRows>(job, r0, r1, t0, t1);
}

template <class Isa, FloatKind kKind>
void tile_float(const TileJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  constexpr int R = Isa::kRows, TM = Isa::kTokens;
  walk_tiles<R, TM>(job, r0, r1, t0, t1, [&](const uint8_t* const* rows, int64_t t, int n_t, float (&out)[R][TM]) {
    with_token_count<TM>(n_t, [&](auto tokens) {
      constexpr int T = decltype(tokens)::value;
      float part[R][T];
      microtile_float<kKind, R, T>(rows, *job.act, job.w->cols, t, part);
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) out[i][j] = part[i][j];
    });
  });
}

template <class Isa>
KernelSet make_kernel_set(std::string_view name) {
  return KernelSet{
      name,
      &quantize_q8_0,
      &quantize_q8_1,
      &tile_float<Isa, FloatKind::F32>,
      &tile_float<Isa, FloatKind::F16>,
      &tile_float<Isa, FloatKind::BF16>,
      &tile_q32<Isa, Kind::Q4_0>,
      &tile_q32<Isa, Kind::Q4_1>,
      &tile_q32<Isa, Kind::Q8_0>,
      &tile_q6_k_portable,
  };
}

}  // namespace
}  // namespace vigil::kernels
