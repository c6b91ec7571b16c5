// A tensor-parallel group's protocol: settings check, the leader's plans, heartbeats, shutdown and
// the products' all_gather (wire format: docs/tensor-parallel.md).
#include "comm/tensor_parallel.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace vigil {
namespace {

constexpr size_t kHeaderInts = 2;  // kind, ints in the plan that follows (0 without one)
constexpr int32_t kMaxPlanInts = 1 << 24;  // a header beyond this is corrupt, not a plan
// An idle follower waits inside a collective the leader has not entered yet: heartbeats at least
// this often keep that wait short, so the stuck-rank rules (rankStuckWaitSeconds, seconds to a
// minute) never take an idle group for one with a laggard.
constexpr std::chrono::milliseconds kMaxHeartbeatInterval{1000};

uint64_t draw_group_id() {
  std::random_device random;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(random()) << 32) | random();
  return id;
}

}  // namespace

TensorParallel::TensorParallel(Communicator& comm, std::chrono::milliseconds timeout)
    : comm_(comm), timeout_(timeout), last_sent_(std::chrono::steady_clock::now()) {
  if (timeout.count() <= 0) throw std::invalid_argument("tensor parallel: the collective timeout must be positive");
  // The group's first message: its id, drawn by the leader, the same on every rank.
  uint64_t id = leader() ? draw_group_id() : 0;
  guarded([&] { comm_.broadcast(&id, sizeof id, 0, timeout_); });
  comm_.set_group_id(id);
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

void TensorParallel::all_gather(const float* mine, size_t count, float* all) {
  guarded([&] { comm_.all_gather(mine, count, all, timeout_); });
  last_sent_ = std::chrono::steady_clock::now();
}

void TensorParallel::start_heartbeat() {
  if (!leader() || heartbeat_.joinable()) return;
  heartbeat_ = std::thread([this] {
    const auto interval = std::clamp(timeout_ / 4, std::chrono::milliseconds(1), kMaxHeartbeatInterval);
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
