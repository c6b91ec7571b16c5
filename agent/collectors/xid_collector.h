// Exports NVIDIA XID errors by GPU and code: every occurrence counted, not just the last value.
#pragma once

#include <prometheus/collectable.h>

namespace vigil::agent {

class XidCollector : public prometheus::Collectable {
 public:
  explicit XidCollector(int xids_fd) : xids_fd_(xids_fd) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  int xids_fd_;
};

}  // namespace vigil::agent
