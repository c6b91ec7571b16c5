// Exports caching-allocator state from USDT probes: allocated bytes, external fragmentation and
// cached slack, per process and allocator (pytorch, vigil).
#pragma once

#include <prometheus/collectable.h>

#include "discovery/process_table.h"

namespace vigil::agent {

class AllocatorCollector : public prometheus::Collectable {
 public:
  // cuda_procs_fd: cuda.bpf.c's per-process map (-1 without the CUDA set): PyTorch's probes say
  // what is handed out, the driver probes what is reserved.
  AllocatorCollector(int allocators_fd, int blocks_fd, int cuda_procs_fd, ProcessTable& processes)
      : allocators_fd_(allocators_fd), blocks_fd_(blocks_fd), cuda_procs_fd_(cuda_procs_fd), processes_(processes) {}
  std::vector<prometheus::MetricFamily> Collect() const override;
  void expire() const;

 private:
  int allocators_fd_, blocks_fd_, cuda_procs_fd_;
  ProcessTable& processes_;
};

}  // namespace vigil::agent
