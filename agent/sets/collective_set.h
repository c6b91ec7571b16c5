// The collective set: collective.bpf.c on the worker's vigil:collective_begin/collective_end USDT
// probes; each failed collective goes to the correlation set's correlator.
#pragma once

#include <chrono>
#include <vector>

#include "correlate/collective_probe.h"
#include "correlate/correlator.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class CollectiveSet : public ProbeSet {
 public:
  // Needs the correlation set loaded (throws std::logic_error otherwise).
  explicit CollectiveSet(SetContext& ctx);
  // Probes the usdt set's files. It does not ask for discovery itself (watches_libraries): it is
  // loaded when probes.usdt is on, and relies on the usdt set for discovery (if that set failed
  // to load, only the configured libraries.usdt files are probed).
  void on_library(const LibraryHit& hit) override;
  void on_full_scan(const std::vector<LibraryHit>& mapped) override;

 private:
  std::chrono::milliseconds grace_;
  Correlator& correlator_;  // the correlation set's, loaded before this one and unloaded after it
  CollectiveProbe probe_;
};

}  // namespace vigil::agent
