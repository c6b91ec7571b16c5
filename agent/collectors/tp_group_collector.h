// Exports the worker's tensor-parallel groups, per process: the group's id, this process's rank
// and nranks, collectives entered, the latest one's age and the bytes its connections hold
// unread. The mixin compares the ranks of one
// group across nodes as it does NCCL communicators' (docs/correlation.md).
#pragma once

#include <prometheus/collectable.h>

#include "discovery/process_table.h"
#include "probes/collective_maps.h"

namespace vigil::agent {

class TpGroupCollector : public prometheus::Collectable {
 public:
  // Keeps no state of its own: an exited process's series go with its kernel state
  // (CollectiveSet::expire).
  TpGroupCollector(const CollectiveReader& maps, ProcessTable& processes) : maps_(maps), processes_(processes) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const CollectiveReader& maps_;
  ProcessTable& processes_;
};

}  // namespace vigil::agent
