// The CUDA set: cuda.bpf.c on every distinct libcuda.so.1 processes map, exported as gpu_memory_*
// and cuda_graph_* / cuda_driver_* series.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "collectors/cuda_graph_collector.h"
#include "collectors/gpu_memory_collector.h"
#include "probes/cuda_maps.h"
#include "probes/cuda_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class CudaSet : public ProbeSet {
 public:
  explicit CudaSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;
  bool watches_libraries() const override { return true; }
  void on_library(const LibraryHit& hit) override;
  void on_full_scan(const std::vector<LibraryHit>& mapped) override;
  void expire() override;

  // What the allocator collector reads reserved bytes from.
  const CudaReader& maps() const { return maps_; }

 private:
  ProcessTable& processes_;
  std::chrono::milliseconds grace_;
  int full_scans_ = 0;
  CudaProbe probe_;
  CudaMaps maps_;
  std::shared_ptr<GpuMemoryCollector> memory_;
  std::shared_ptr<CudaGraphCollector> graphs_;
};

}  // namespace vigil::agent
