// A tensor-parallel group's protocol over a Communicator: the same settings on every rank, the
// leader's plans, heartbeats and shutdown, and the all_gather of the products' shares. It carries
// bytes only: the split product itself is the CPU backend's (backend/cpu/column_parallel_matmul.h).
//
// Rank 0 (the leader) plans every batch; before each forward pass it broadcasts the plan, an
// opaque array of ints here (the CPU backend encodes batches: backend/batch_plan.h; wire format in
// docs/tensor-parallel.md), and the followers run the same forward pass on it. While
// idle the leader sends a heartbeat every timeout/4 (at most 1 s), so a follower waiting for work
// can apply the same timeout and never hangs silently when the leader or the link is gone. The
// group's first message is its id (Communicator::group_id), drawn by the leader.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace vigil {

class TensorParallel {
 public:
  enum class Message : int32_t { kHeartbeat = 0, kBatch = 1, kShutdown = 2 };

  // Agrees on the group's id: a collective, so every rank constructs one at the same point.
  TensorParallel(Communicator& comm, std::chrono::milliseconds timeout);
  ~TensorParallel();  // stops the heartbeat
  TensorParallel(const TensorParallel&) = delete;
  TensorParallel& operator=(const TensorParallel&) = delete;

  int rank() const { return comm_.rank(); }
  int world() const { return comm_.world(); }
  bool leader() const { return comm_.rank() == 0; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Called once, with the first failed collective, on the thread that saw it (engine, heartbeat
  // or follower loop); the CollectiveError is rethrown to the caller afterwards.
  void set_failure_handler(std::function<void(const CollectiveError&)> handler);

  // Every rank must pass the same values (model shape, cache geometry): a mismatch would desync the
  // forward passes. Throws std::runtime_error naming the first differing value and the ranks.
  void check_same_on_all_ranks(const std::vector<std::pair<std::string, int64_t>>& values);

  // Takes the collective lock for one forward pass; the leader also broadcasts the batch's plan
  // (followers pass an empty one).
  std::unique_lock<std::mutex> begin_forward(std::span<int32_t> plan);

  // Every rank's `count` floats into `all`, in rank order ([world, count]), inside a forward pass.
  void all_gather(const float* mine, size_t count, float* all);

  // Leader: a heartbeat every timeout/4 (at most 1 s) while no forward pass runs.
  void start_heartbeat();
  // Leader: stops the heartbeat and tells the followers to exit.
  void send_shutdown();

  // Follower: waits (up to the timeout) for the leader's next message; for kBatch, `plan` holds
  // the leader's plan.
  Message receive(std::vector<int32_t>& plan);

 private:
  template <typename F>
  void guarded(F&& collective);
  void broadcast_header(Message kind, int32_t plan_ints);
  void stop_heartbeat();

  Communicator& comm_;
  std::chrono::milliseconds timeout_;
  std::function<void(const CollectiveError&)> on_failure_;
  std::once_flag failure_once_;

  std::mutex mu_;  // one collective sequence at a time: engine thread and heartbeat
  std::chrono::steady_clock::time_point last_sent_;
  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  bool heartbeat_stop_ = false;
  std::thread heartbeat_;
};

}  // namespace vigil
