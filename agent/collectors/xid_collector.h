// Exports NVIDIA XID errors by GPU, code, class and process: every occurrence counted once, not
// just the last value; and what the kernel log reader refused or missed.
#pragma once

#include <prometheus/collectable.h>

#include "probes/xid_ledger.h"

namespace vigil::agent {

class XidCollector : public prometheus::Collectable {
 public:
  explicit XidCollector(const XidReader& ledger) : ledger_(ledger) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const XidReader& ledger_;
};

}  // namespace vigil::agent
