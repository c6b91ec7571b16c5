// Reads and forgets collective.bpf.c's per-process map.
#include "probes/collective_maps.h"

#include <bpf/bpf.h>

#include "probes/bpf_util.h"

namespace vigil::agent {

CollectiveSnapshot CollectiveMaps::read() const {
  CollectiveSnapshot s;
  for (const auto& [pid, p] : map_entries<__u32, collective_proc>(procs_fd_)) s.procs[pid] = p;
  return s;
}

void CollectiveMaps::forget(const std::set<uint32_t>& pids) const {
  for (uint32_t pid : pids) bpf_map_delete_elem(procs_fd_, &pid);
}

}  // namespace vigil::agent
