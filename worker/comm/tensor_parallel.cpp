// Column-parallel matmul and the broadcast of the leader's plans (wire format:
// docs/tensor-parallel.md).
#include "comm/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "base/ggml_types.h"

namespace vigil {
namespace {

constexpr size_t kHeaderInts = 2;  // kind, ints in the plan that follows (0 without one)
constexpr int32_t kMaxPlanInts = 1 << 24;  // a header beyond this is corrupt, not a plan

}  // namespace

TensorParallel::TensorParallel(Communicator& comm, std::chrono::milliseconds timeout)
    : comm_(comm), timeout_(timeout), last_sent_(std::chrono::steady_clock::now()) {
  if (timeout.count() <= 0) throw std::invalid_argument("tensor parallel: the collective timeout must be positive");
}

TensorParallel::~TensorParallel() { stop_heartbeat(); }

void TensorParallel::set_failure_handler(std::function<void(const CollectiveError&)> handler) {
  on_failure_ = std::move(handler);
}

template <typename F>
void TensorParallel::guarded(F&& collective) {
  try {
    collective();
  } catch (const CollectiveError& e) {
    std::call_once(failure_once_, [&] {
      if (on_failure_) on_failure_(e);
    });
    throw;
  }
}

void TensorParallel::check_same_on_all_ranks(const std::vector<std::pair<std::string, int64_t>>& values) {
  // Floats carry these small integers exactly (all below 2^24).
  std::vector<float> mine(values.size()), all(values.size() * static_cast<size_t>(world()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].second < 0 || values[i].second >= (1 << 24))
      throw std::invalid_argument(values[i].first + ": " + std::to_string(values[i].second) + " cannot be compared");
    mine[i] = static_cast<float>(values[i].second);
  }
  std::lock_guard lock(mu_);
  guarded([&] { comm_.all_gather(mine.data(), mine.size(), all.data(), timeout_); });
  for (int r = 0; r < world(); ++r)
    for (size_t i = 0; i < values.size(); ++i) {
      const float theirs = all[static_cast<size_t>(r) * values.size() + i];
      if (theirs != mine[i])
        throw std::runtime_error("tensor parallel: " + values[i].first + " is " + std::to_string(values[i].second) +
                                 " on rank " + std::to_string(rank()) + " but " +
                                 std::to_string(static_cast<int64_t>(theirs)) + " on rank " + std::to_string(r) +
                                 ": start every rank with the same model and engine settings");
    }
}

void TensorParallel::broadcast_header(Message kind, int32_t plan_ints) {
  int32_t header[kHeaderInts] = {static_cast<int32_t>(kind), plan_ints};
  guarded([&] { comm_.broadcast(header, sizeof header, 0, timeout_); });
  last_sent_ = std::chrono::steady_clock::now();
}

std::unique_lock<std::mutex> TensorParallel::begin_forward(std::span<int32_t> plan) {
  std::unique_lock lock(mu_);
  if (!leader()) return lock;
  broadcast_header(Message::kBatch, static_cast<int32_t>(plan.size()));
  guarded([&] { comm_.broadcast(plan.data(), plan.size_bytes(), 0, timeout_); });
  return lock;
}

TensorParallel::Message TensorParallel::receive(std::vector<int32_t>& plan) {
  std::lock_guard lock(mu_);
  int32_t header[kHeaderInts] = {};
  guarded([&] { comm_.broadcast(header, sizeof header, 0, timeout_); });
  const auto kind = static_cast<Message>(header[0]);
  if (kind != Message::kBatch) return kind;
  if (header[1] < 0 || header[1] > kMaxPlanInts)
    throw std::runtime_error("tensor parallel: the leader's header announces a plan of " + std::to_string(header[1]) +
                             " ints");
  plan.resize(static_cast<size_t>(header[1]));
  guarded([&] { comm_.broadcast(plan.data(), plan.size() * sizeof(int32_t), 0, timeout_); });
  return kind;
}

void TensorParallel::matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                            MatmulScratch& scratch) {
  const int64_t ranks = world();
  const int64_t share = (w.rows + ranks - 1) / ranks;
  const int64_t r0 = std::min(w.rows, share * rank()), r1 = std::min(w.rows, r0 + share);
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
  guarded([&] { comm_.all_gather(out, per_rank, gathered_.data(), timeout_); });
  // gathered_ is [rank][token][row in share]; y is [token][row].
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t begin = share * r, rows = std::max<int64_t>(0, std::min(w.rows, begin + share) - begin);
    for (int64_t t = 0; t < n_tokens; ++t)
      std::memcpy(y + t * w.rows + begin, gathered_.data() + (static_cast<size_t>(r) * per_rank) + t * share,
                  static_cast<size_t>(rows) * sizeof(float));
  }
  last_sent_ = std::chrono::steady_clock::now();
}

void TensorParallel::start_heartbeat() {
  if (!leader() || heartbeat_.joinable()) return;
  heartbeat_ = std::thread([this] {
    const auto interval = std::max(timeout_ / 4, std::chrono::milliseconds(1));
    std::unique_lock hb(heartbeat_mu_);
    while (!heartbeat_cv_.wait_for(hb, interval, [&] { return heartbeat_stop_; })) {
      std::unique_lock lock(mu_, std::try_to_lock);
      if (!lock.owns_lock() || std::chrono::steady_clock::now() - last_sent_ < interval) continue;  // busy: no need
      try {
        broadcast_header(Message::kHeartbeat, 0);
      } catch (const CollectiveError&) {
        return;  // reported through the failure handler; the engine's next pass fails too
      }
    }
  });
}

void TensorParallel::stop_heartbeat() {
  {
    std::lock_guard hb(heartbeat_mu_);
    heartbeat_stop_ = true;
  }
  heartbeat_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void TensorParallel::send_shutdown() {
  stop_heartbeat();
  std::lock_guard lock(mu_);
  broadcast_header(Message::kShutdown, 0);
}

}  // namespace vigil
