// Exports CUDA Graph and stream-capture health per process, and driver call/error counts.
#pragma once

#include <prometheus/collectable.h>

#include "discovery/process_table.h"

namespace vigil::agent {

class CudaGraphCollector : public prometheus::Collectable {
 public:
  CudaGraphCollector(int procs_fd, int errors_fd, ProcessTable& processes)
      : procs_fd_(procs_fd), errors_fd_(errors_fd), processes_(processes) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  int procs_fd_, errors_fd_;
  ProcessTable& processes_;
};

}  // namespace vigil::agent
