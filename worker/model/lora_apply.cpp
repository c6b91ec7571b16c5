// The LoRA delta of one matrix for a group of tokens, on the CPU kernels. Apart from the loader so
// that the loader (and its fuzz target) builds without the kernels.
#include <cstring>

#include "model/lora_adapter.h"

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
