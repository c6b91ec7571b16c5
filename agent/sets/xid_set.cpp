// The XID set: every XID the driver reports, counted by GPU and code, and logged with its message.
#include "sets/xid_set.h"

namespace vigil::agent {

XidSet::XidSet(SetContext& ctx) : probe_(ctx.cfg.kernel_btf, ctx.stats), maps_(probe_.xids_fd()) {
  collector_ = std::make_shared<XidCollector>(maps_);
  probe_.add_rings(ctx.rings);  // last: a constructor that throws leaves no callback behind
}

std::vector<NamedCollector> XidSet::collectors() { return {{"xid", collector_}}; }

}  // namespace vigil::agent
