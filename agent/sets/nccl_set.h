// The NCCL set: nccl.bpf.c on every distinct libnccl.so.2 processes map, exported as nccl_*.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "collectors/nccl_collector.h"
#include "probes/nccl_maps.h"
#include "probes/nccl_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class NcclSet : public ProbeSet {
 public:
  explicit NcclSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;
  bool watches_libraries() const override { return true; }
  void on_library(const LibraryHit& hit) override;
  void on_full_scan(const std::vector<LibraryHit>& mapped) override;
  void expire() override;

  // What the correlation turns into failures.
  const NcclReader& maps() const { return maps_; }

 private:
  ProcessTable& processes_;
  std::chrono::milliseconds grace_;
  int full_scans_ = 0;
  NcclProbe probe_;
  NcclMaps maps_;  // the owner of probe_'s per-process maps
  std::shared_ptr<NcclCollector> collector_;
};

}  // namespace vigil::agent
