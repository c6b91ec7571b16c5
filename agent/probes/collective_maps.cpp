// Reads and forgets collective.bpf.c's per-process maps.
#include "probes/collective_maps.h"

#include <bpf/bpf.h>

#include "probes/bpf_util.h"

namespace vigil::agent {

CollectiveSnapshot CollectiveMaps::read() const {
  CollectiveSnapshot s;
  for (const auto& [pid, p] : map_entries<__u32, collective_proc>(procs_fd_)) s.procs[pid] = p;
  for (const auto& [pid, g] : map_entries<__u32, collective_group>(groups_fd_)) s.groups[pid] = g;
  return s;
}

void CollectiveMaps::forget(const std::set<uint32_t>& pids) const {
  for (uint32_t pid : pids) {
    bpf_map_delete_elem(procs_fd_, &pid);
    bpf_map_delete_elem(groups_fd_, &pid);
  }
}

}  // namespace vigil::agent
