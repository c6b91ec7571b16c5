// The USDT set: usdt.bpf.c on the caching allocators' probes (PyTorch's pytorch:*, the worker's
// vigil:*), exported as gpu_memory_allocator_* and the slack and fragmentation ratios.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "collectors/allocator_collector.h"
#include "probes/usdt_maps.h"
#include "probes/usdt_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class UsdtSet : public ProbeSet {
 public:
  explicit UsdtSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;
  bool watches_libraries() const override { return true; }
  void on_library(const LibraryHit& hit) override;
  void on_full_scan(const std::vector<LibraryHit>& mapped) override;
  void expire() override;

 private:
  ProcessTable& processes_;
  std::chrono::milliseconds grace_;
  UsdtProbe probe_;
  UsdtMaps maps_;
  std::shared_ptr<AllocatorCollector> allocators_;
};

}  // namespace vigil::agent
