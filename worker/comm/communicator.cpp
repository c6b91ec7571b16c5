// The instrumented entry points shared by every backend: probes, timing, error classification.
#include "comm/communicator.h"

#include "base/probes.h"

namespace vigil {

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kBarrier: return "barrier";
  }
  return "unknown";
}

const char* collective_status_name(CollectiveStatus status) {
  switch (status) {
    case CollectiveStatus::kOk: return "ok";
    case CollectiveStatus::kTimeout: return "timeout";
    case CollectiveStatus::kError: return "error";
  }
  return "unknown";
}

template <typename F>
void Communicator::run(CollectiveOp op, size_t bytes, std::chrono::milliseconds timeout, F&& call) {
  using Clock = std::chrono::steady_clock;
  if (timeout.count() <= 0)
    throw std::invalid_argument(std::string(collective_op_name(op)) + ": the timeout must be positive");
  VIGIL_PROBE(collective_begin, static_cast<uint32_t>(op), bytes, timeout.count(), group_id_, sequence_,
              static_cast<uint32_t>(rank()), static_cast<uint32_t>(world()));
  ++sequence_;
  const auto start = Clock::now();
  CollectiveStatus status = CollectiveStatus::kOk;
  std::string what;
  try {
    call();
  } catch (const CollectiveError& e) {
    status = e.status();
    what = e.what();
  } catch (const std::exception& e) {
    status = CollectiveStatus::kError;
    what = e.what();
  }
  const auto elapsed = Clock::now() - start;
  VIGIL_PROBE(collective_end, static_cast<uint32_t>(op), bytes, static_cast<uint32_t>(status),
              std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  if (observer_) observer_->on_collective(op, status, bytes, std::chrono::duration<double>(elapsed).count());
  if (status != CollectiveStatus::kOk)
    throw CollectiveError(op, status,
                          std::string(backend()) + " " + collective_op_name(op) + " (rank " + std::to_string(rank()) +
                              " of " + std::to_string(world()) + ", timeout " + std::to_string(timeout.count()) +
                              " ms): " + collective_status_name(status) + ": " + what);
}

void Communicator::all_gather(const float* in, size_t count, float* out, std::chrono::milliseconds timeout) {
  run(CollectiveOp::kAllGather, count * sizeof(float), timeout, [&] { do_all_gather(in, count, out, timeout); });
}

void Communicator::all_reduce_sum(float* data, size_t count, std::chrono::milliseconds timeout) {
  run(CollectiveOp::kAllReduce, count * sizeof(float), timeout, [&] { do_all_reduce_sum(data, count, timeout); });
}

void Communicator::broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout) {
  if (root < 0 || root >= world()) throw std::invalid_argument("broadcast: root " + std::to_string(root) + " out of range");
  run(CollectiveOp::kBroadcast, bytes, timeout, [&] { do_broadcast(data, bytes, root, timeout); });
}

void Communicator::barrier(std::chrono::milliseconds timeout) {
  run(CollectiveOp::kBarrier, 0, timeout, [&] { do_barrier(timeout); });
}

}  // namespace vigil
