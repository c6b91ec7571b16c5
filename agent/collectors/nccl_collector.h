// Exports NCCL calls by function and result, bytes by op, async errors, aborts and communicators,
// and per communicator of a process its id, rank and collectives entered.
#pragma once

#include <prometheus/collectable.h>

#include "discovery/process_table.h"
#include "probes/nccl_maps.h"

namespace vigil::agent {

class NcclCollector : public prometheus::Collectable {
 public:
  // Keeps no state of its own: an exited process's series go with its kernel state (NcclSet::expire).
  NcclCollector(const NcclReader& maps, ProcessTable& processes) : maps_(maps), processes_(processes) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const NcclReader& maps_;
  ProcessTable& processes_;
};

}  // namespace vigil::agent
