// NCCL/TCP correlation: no probes of its own. It puts the failures of the NCCL set (async errors,
// aborts) and of the collective set against the TCP set's connections (nccl_tcp_*).
#pragma once

#include <memory>
#include <vector>

#include "correlate/correlator.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class CorrelationSet : public ProbeSet {
 public:
  // Needs the TCP set loaded (throws std::logic_error otherwise); the NCCL and collective sets are
  // optional.
  explicit CorrelationSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;
  void expire() override;
  // NCCL's failures are read from its maps, soon after they happen.
  void poll() override;

 private:
  std::shared_ptr<Correlator> correlator_;
};

}  // namespace vigil::agent
