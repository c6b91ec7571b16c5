// Exports caching-allocator state from USDT probes: allocated bytes, external fragmentation and
// cached slack, per process and allocator (pytorch, vigil).
#pragma once

#include <prometheus/collectable.h>

#include "discovery/process_table.h"
#include "probes/cuda_maps.h"
#include "probes/usdt_maps.h"

namespace vigil::agent {

class AllocatorCollector : public prometheus::Collectable {
 public:
  // cuda: the CUDA set's maps (nullptr without the set): PyTorch's probes say what is handed out,
  // the driver probes what is reserved.
  AllocatorCollector(const UsdtReader& maps, const CudaReader* cuda, ProcessTable& processes)
      : maps_(maps), cuda_(cuda), processes_(processes) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const UsdtReader& maps_;
  const CudaReader* cuda_;
  ProcessTable& processes_;
};

}  // namespace vigil::agent
