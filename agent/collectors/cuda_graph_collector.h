// Exports CUDA Graph and stream-capture health per process, and driver call/error counts.
#pragma once

#include <prometheus/collectable.h>

#include "discovery/process_table.h"
#include "probes/cuda_maps.h"

namespace vigil::agent {

class CudaGraphCollector : public prometheus::Collectable {
 public:
  CudaGraphCollector(const CudaReader& maps, ProcessTable& processes) : maps_(maps), processes_(processes) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const CudaReader& maps_;
  ProcessTable& processes_;
};

}  // namespace vigil::agent
