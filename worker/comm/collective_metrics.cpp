// Series are created once here (all ops x outcomes, so a first timeout is a 0 -> 1 step a rate()
// sees); the observer only touches references.
#include "comm/collective_metrics.h"

namespace vigil {

CollectiveMetrics::CollectiveMetrics(prometheus::Registry& registry, const Communicator& comm,
                                     std::chrono::milliseconds timeout) {
  // From tens of microseconds (loopback) to minutes (timeouts).
  const prometheus::Histogram::BucketBoundaries buckets = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03,
                                                           0.1,  0.3,  1.0,  3.0,  10.0, 30.0, 60.0, 300.0};
  auto& calls = prometheus::BuildCounter()
                    .Name("vigil_worker_collective_calls_total")
                    .Help("Tensor-parallel collectives by op and outcome (ok, timeout, error).")
                    .Register(registry);
  auto& bytes = prometheus::BuildCounter()
                    .Name("vigil_worker_collective_bytes_total")
                    .Help("Bytes this rank contributed to collectives, by op.")
                    .Register(registry);
  auto& seconds = prometheus::BuildHistogram()
                      .Name("vigil_worker_collective_duration_seconds")
                      .Help("Time from a collective's start to its end (success or failure), by op.")
                      .Register(registry);
  for (size_t o = 0; o < kOps; ++o) {
    const std::string op = collective_op_name(static_cast<CollectiveOp>(o + 1));
    for (size_t s = 0; s < kStatuses; ++s)
      calls_[o][s] = &calls.Add({{"op", op}, {"status", collective_status_name(static_cast<CollectiveStatus>(s))}});
    bytes_[o] = &bytes.Add({{"op", op}});
    seconds_[o] = &seconds.Add({{"op", op}}, buckets);
  }
  prometheus::BuildGauge()
      .Name("vigil_worker_collective_timeout_seconds")
      .Help("The configured timeout of every tensor-parallel collective.")
      .Register(registry)
      .Add({})
      .Set(std::chrono::duration<double>(timeout).count());
  prometheus::BuildGauge()
      .Name("vigil_worker_tensor_parallel_info")
      .Help("This rank's place in the tensor-parallel group and the collective backend.")
      .Register(registry)
      .Add({{"rank", std::to_string(comm.rank())}, {"world", std::to_string(comm.world())},
            {"backend", std::string(comm.backend())}})
      .Set(1);
}

void CollectiveMetrics::on_collective(CollectiveOp op, CollectiveStatus status, size_t bytes, double seconds) {
  const size_t o = static_cast<size_t>(op) - 1, s = static_cast<size_t>(status);
  if (o >= kOps || s >= kStatuses) return;
  calls_[o][s]->Increment();
  bytes_[o]->Increment(static_cast<double>(bytes));
  seconds_[o]->Observe(seconds);
}

}  // namespace vigil
