// Tensor parallelism's matrix product: each rank computes a contiguous share of a weight matrix's
// output rows with the CPU kernels, and the group's all_gather assembles the full result on
// every rank.
//
// Why by output rows (column parallel) and not the usual row-parallel split with an all_reduce:
// every output element is then the same dot product, in the same order, as on one rank, so the
// forward pass is bit-identical and greedy tokens do not change. A row-parallel split sums partial
// products in another order, and the 8-bit activation quantization downstream turns those last-bit
// differences into different tokens. Heads need not divide evenly either (SmolLM2: 9 query heads,
// 3 KV heads): the split is over rows, and attention runs whole on every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "base/ggml_types.h"
#include "comm/tensor_parallel.h"
#include "kernels/cpu/matmul.h"

namespace vigil {

class ColumnParallelMatmul {
 public:
  explicit ColumnParallelMatmul(TensorParallel& tp) : tp_(tp) {}

  // y = x · Wᵀ, bit-identical to matmul(): this rank's share of rows, then an all_gather.
  // x: [n_tokens, w.cols], y: [n_tokens, w.rows].
  void run(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch);

 private:
  TensorParallel& tp_;
  std::vector<float> local_;     // [n_tokens, share] this rank's rows
  std::vector<float> gathered_;  // [world, n_tokens, share]
};

}  // namespace vigil
