// The collective set: collective.bpf.c on the worker's vigil:collective_begin/collective_end USDT
// probes. Its maps (each worker's collective timeout) are read by the correlation set's correlator,
// and each failed collective goes to it as it happens; its collector exports each worker's place
// in its tensor-parallel group.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "collectors/tp_group_collector.h"
#include "probes/collective_maps.h"
#include "probes/collective_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class CollectiveSet : public ProbeSet {
 public:
  explicit CollectiveSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;
  // Probes the usdt set's files. It does not ask for discovery itself (watches_libraries): it is
  // loaded when probes.usdt is on, and relies on the usdt set for discovery (if that set failed
  // to load, only the configured libraries.usdt files are probed).
  void on_library(const LibraryHit& hit) override;
  void on_full_scan(const std::vector<LibraryHit>& mapped) override;
  void expire() override;

  const CollectiveReader& maps() const { return maps_; }
  // Where failed collectives go from now on (the correlation set's correlator, loaded after this
  // set); before, they are dropped. SINK runs on the ring reader's thread.
  using FailureSink = std::function<void(const collective_failure&)>;
  void send_failures_to(FailureSink sink);

 private:
  ProcessTable& processes_;
  std::chrono::milliseconds grace_;
  std::mutex sink_mu_;
  FailureSink sink_;
  CollectiveProbe probe_;
  CollectiveMaps maps_;  // the owner of probe_'s procs map
  std::shared_ptr<TpGroupCollector> collector_;
};

}  // namespace vigil::agent
