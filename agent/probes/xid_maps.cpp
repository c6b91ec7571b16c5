// Reads xid.bpf.c's counters.
#include "probes/xid_maps.h"

#include <bpf/bpf.h>
#include <linux/types.h>

#include "probes/bpf_util.h"

namespace vigil::agent {

XidSnapshot XidMaps::read() const {
  XidSnapshot s;
  for (const auto& k : map_keys<xid_key>(xids_fd_)) {
    __u64 n = 0;
    if (bpf_map_lookup_elem(xids_fd_, &k, &n) == 0) s.counts.emplace_back(k, n);
  }
  return s;
}

}  // namespace vigil::agent
