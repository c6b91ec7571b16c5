// Ties NCCL processes to their TCP stalls: how close a stalled connection is to the collective
// timeout, so an NCCL abort can be read as "TCP was backing off" rather than a mystery.
#pragma once

#include <prometheus/collectable.h>

#include <chrono>

#include "discovery/process_table.h"

namespace vigil::agent {

class NcclTcpCollector : public prometheus::Collectable {
 public:
  NcclTcpCollector(int nccl_procs_fd, int tcp_procs_fd, std::chrono::milliseconds collective_timeout,
                   ProcessTable& processes)
      : nccl_procs_fd_(nccl_procs_fd), tcp_procs_fd_(tcp_procs_fd), timeout_(collective_timeout),
        processes_(processes) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  int nccl_procs_fd_, tcp_procs_fd_;
  std::chrono::milliseconds timeout_;
  ProcessTable& processes_;
};

}  // namespace vigil::agent
