// The XID set: NVIDIA XID errors from the kernel log (every driver) and from the open module's
// nvidia:nvidia_dev_xid tracepoint where it is defined, each XID counted once by the ledger
// (gpu_xid_errors_total). Disabled only when neither source can be read.
#pragma once

#include <memory>
#include <vector>

#include "collectors/xid_collector.h"
#include "probes/kmsg_reader.h"
#include "probes/xid_ledger.h"
#include "probes/xid_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class XidSet : public ProbeSet {
 public:
  explicit XidSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;
  void poll() override { ledger_.settle(); }

 private:
  XidLedger ledger_;                 // first: both sources feed it until they are gone
  std::unique_ptr<XidProbe> probe_;  // where the module defines the tracepoint
  std::unique_ptr<KmsgReader> log_;  // unless kernel_log is ""
  std::shared_ptr<XidCollector> collector_;
};

}  // namespace vigil::agent
