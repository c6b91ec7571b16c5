#include "backend/cpu/lora_apply.h"

#include <cstring>

namespace vigil {

void lora_add(const LoraPair& p, const float* x, const int* rows, int n, float* y, float* gather, float* t,
              float* d, ThreadPool& pool, MatmulScratch& scratch) {
  const size_t n_in = static_cast<size_t>(p.a.cols), n_out = static_cast<size_t>(p.b.rows);
  for (int k = 0; k < n; ++k)
    std::memcpy(gather + static_cast<size_t>(k) * n_in, x + static_cast<size_t>(rows[k]) * n_in, n_in * sizeof(float));
  matmul(p.a, gather, n, t, pool, scratch);  // [n, rank]
  matmul(p.b, t, n, d, pool, scratch);       // [n, n_out]
  for (int k = 0; k < n; ++k) {
    float* yr = y + static_cast<size_t>(rows[k]) * n_out;
    const float* dr = d + static_cast<size_t>(k) * n_out;
    for (size_t r = 0; r < n_out; ++r) yr[r] += p.scale * dr[r];
  }
}

}  // namespace vigil
