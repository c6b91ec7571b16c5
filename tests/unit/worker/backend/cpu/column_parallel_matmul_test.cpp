// The CPU backend's split product over a real two-rank Gloo group on loopback: bit-identical to
// one rank's matmul.
#include "backend/cpu/column_parallel_matmul.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "worker/comm/gloo_ranks.h"

namespace vigil {
namespace {

using namespace std::chrono_literals;

// Rows that do not divide by the world size (7 over 2 ranks) exercise the padded last share.
TEST(ColumnParallelMatmul, IsBitIdenticalToOneRank) {
  const int64_t rows = 7, cols = 64, tokens = 3;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(tokens * cols));
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  const WeightView view{GgmlType::F32, reinterpret_cast<const uint8_t*>(w.data()), rows, cols};
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<float> want(static_cast<size_t>(tokens * rows));
  matmul(view, x.data(), tokens, want.data(), pool, scratch);

  test::run_ranks(2, [&](GlooCommunicator& comm) {
    TensorParallel tp(comm, 5s);
    ColumnParallelMatmul split(tp);
    ThreadPool p(1);
    MatmulScratch s;
    std::vector<float> got(want.size(), -1.0f);
    split.run(view, x.data(), tokens, got.data(), p, s);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "rank " << comm.rank();
  });
}

}  // namespace
}  // namespace vigil
