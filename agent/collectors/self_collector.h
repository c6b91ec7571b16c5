// Exports the agent's own health as vigil_agent_* series.
#pragma once

#include <prometheus/collectable.h>

#include "stats/agent_stats.h"

namespace vigil::agent {

class SelfCollector : public prometheus::Collectable {
 public:
  explicit SelfCollector(const AgentStats& stats) : stats_(stats) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const AgentStats& stats_;
};

}  // namespace vigil::agent
