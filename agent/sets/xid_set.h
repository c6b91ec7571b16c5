// The XID set: xid.bpf.c on nvidia:nvidia_dev_xid when the NVIDIA module defines it
// (gpu_xid_errors_total); without the tracepoint it is reported as tracepoint_missing.
#pragma once

#include <memory>
#include <vector>

#include "collectors/xid_collector.h"
#include "probes/xid_maps.h"
#include "probes/xid_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class XidSet : public ProbeSet {
 public:
  explicit XidSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;

 private:
  XidProbe probe_;
  XidMaps maps_;
  std::shared_ptr<XidCollector> collector_;
};

}  // namespace vigil::agent
