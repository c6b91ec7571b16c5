// vigil_worker_collective_* metrics: every collective counted by op and outcome, its bytes and
// duration, and the configured timeout (so a dashboard can put durations against it).
#pragma once

#include <array>
#include <chrono>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "comm/communicator.h"

namespace vigil {

class CollectiveMetrics final : public CollectiveObserver {
 public:
  CollectiveMetrics(prometheus::Registry& registry, const Communicator& comm, std::chrono::milliseconds timeout);
  void on_collective(CollectiveOp op, CollectiveStatus status, size_t bytes, double seconds) override;

 private:
  static constexpr size_t kOps = 4, kStatuses = 3;
  std::array<std::array<prometheus::Counter*, kStatuses>, kOps> calls_{};
  std::array<prometheus::Counter*, kOps> bytes_{};
  std::array<prometheus::Histogram*, kOps> seconds_{};
};

}  // namespace vigil
