// Exports NCCL calls by function and result, bytes by op, async errors, aborts and communicators,
// and per communicator of a process its id, rank and collectives entered.
#pragma once

#include <prometheus/collectable.h>

#include "discovery/process_table.h"

namespace vigil::agent {

class NcclCollector : public prometheus::Collectable {
 public:
  NcclCollector(int calls_fd, int async_fd, int procs_fd, int comms_fd, ProcessTable& processes)
      : calls_fd_(calls_fd), async_fd_(async_fd), procs_fd_(procs_fd), comms_fd_(comms_fd), processes_(processes) {}
  std::vector<prometheus::MetricFamily> Collect() const override;
  // Drops the kernel state of processes gone longer than the grace period.
  void expire() const;

 private:
  int calls_fd_, async_fd_, procs_fd_, comms_fd_;
  ProcessTable& processes_;
};

}  // namespace vigil::agent
