// Exports what the agent's endpoint and its liveness rule see: HTTP connections, answers and
// cuts, and how long ago the housekeeping loop last completed a tick.
#pragma once

#include <prometheus/collectable.h>

#include "stats/http_stats.h"
#include "stats/loop_liveness.h"

namespace vigil::agent {

class EndpointCollector : public prometheus::Collectable {
 public:
  EndpointCollector(const HttpStats& http, const LoopLiveness& liveness) : http_(http), liveness_(liveness) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const HttpStats& http_;
  const LoopLiveness& liveness_;
};

}  // namespace vigil::agent
