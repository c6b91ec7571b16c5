// Inner loops of attention over the f16 KV cache, SIMD-dispatched like the matmul kernels.
#pragma once

#include <cstdint>

namespace vigil {

// Σ a[i] · b[i] with b in f16; n is a multiple of 16.
float dot_f32_f16(const float* a, const uint16_t* b, int n);
// out[i] += w · v[i] with v in f16; n is a multiple of 16.
void axpy_f16(float w, const uint16_t* v, float* out, int n);

}  // namespace vigil
