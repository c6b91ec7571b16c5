// Tensor parallelism's matrix product (see column_parallel_matmul.h).
#include "backend/cpu/column_parallel_matmul.h"

#include <algorithm>
#include <cstring>

namespace vigil {

void ColumnParallelMatmul::run(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                               MatmulScratch& scratch) {
  const int64_t ranks = tp_.world();
  const int64_t share = (w.rows + ranks - 1) / ranks;
  const int64_t r0 = std::min(w.rows, share * tp_.rank()), r1 = std::min(w.rows, r0 + share);
  const size_t row_bytes = w.row_bytes();
  const WeightView mine{w.type, w.data + static_cast<size_t>(r0) * row_bytes, r1 - r0, w.cols};

  const size_t per_rank = static_cast<size_t>(n_tokens * share);
  if (local_.size() < per_rank) local_.resize(per_rank);
  if (gathered_.size() < per_rank * static_cast<size_t>(ranks)) gathered_.resize(per_rank * static_cast<size_t>(ranks));
  // The last rank's share may be short; its padding rows travel as zeros and are dropped below.
  float* out = local_.data();
  if (mine.rows == share) {
    ::vigil::matmul(mine, x, n_tokens, out, pool, scratch);
  } else {
    std::fill(local_.begin(), local_.begin() + static_cast<long>(per_rank), 0.0f);
    if (mine.rows > 0) {
      ::vigil::matmul(mine, x, n_tokens, gathered_.data(), pool, scratch);
      for (int64_t t = 0; t < n_tokens; ++t)
        std::memcpy(out + t * share, gathered_.data() + t * mine.rows, static_cast<size_t>(mine.rows) * sizeof(float));
    }
  }
  tp_.all_gather(out, per_rank, gathered_.data());
  // gathered_ is [rank][token][row in share]; y is [token][row].
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t begin = share * r, rows = std::max<int64_t>(0, std::min(w.rows, begin + share) - begin);
    for (int64_t t = 0; t < n_tokens; ++t)
      std::memcpy(y + t * w.rows + begin, gathered_.data() + (static_cast<size_t>(r) * per_rank) + t * share,
                  static_cast<size_t>(rows) * sizeof(float));
  }
}

}  // namespace vigil
