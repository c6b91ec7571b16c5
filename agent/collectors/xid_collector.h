// Exports NVIDIA XID errors by GPU and code: every occurrence counted, not just the last value.
#pragma once

#include <prometheus/collectable.h>

#include "probes/xid_maps.h"

namespace vigil::agent {

class XidCollector : public prometheus::Collectable {
 public:
  explicit XidCollector(const XidReader& maps) : maps_(maps) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const XidReader& maps_;
};

}  // namespace vigil::agent
