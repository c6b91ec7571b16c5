// Reads and forgets nccl.bpf.c's per-process maps.
#include "probes/nccl_maps.h"

#include <bpf/bpf.h>

#include "probes/bpf_util.h"

namespace vigil::agent {
namespace {

// Every (key, value) of the map at FD, in key order of the walk.
template <typename Key, typename Value>
std::vector<std::pair<Key, Value>> entries(int fd) {
  std::vector<std::pair<Key, Value>> out;
  for (const auto& k : map_keys<Key>(fd)) {
    Value v{};
    if (bpf_map_lookup_elem(fd, &k, &v) == 0) out.emplace_back(k, v);
  }
  return out;
}

template <typename Key>
void delete_of(int fd, const std::set<uint32_t>& pids) {
  for (const auto& k : map_keys<Key>(fd))
    if (pids.count(k.tgid)) bpf_map_delete_elem(fd, &k);
}

}  // namespace

NcclSnapshot NcclMaps::read(unsigned maps) const {
  NcclSnapshot s;
  if (maps & kNcclProcs)
    for (const auto& [pid, p] : entries<__u32, nccl_proc>(procs_fd_)) s.procs[pid] = p;
  if (maps & kNcclComms) s.comms = entries<nccl_comm_key, nccl_comm_val>(comms_fd_);
  if (maps & kNcclCalls) s.calls = entries<nccl_call_key, nccl_call_val>(calls_fd_);
  if (maps & kNcclAsync)
    for (const auto& [k, n] : entries<nccl_async_key, __u64>(async_fd_)) s.async.emplace_back(k, n);
  return s;
}

void NcclMaps::forget(const std::set<uint32_t>& pids) const {
  if (pids.empty()) return;
  for (uint32_t pid : pids) bpf_map_delete_elem(procs_fd_, &pid);
  delete_of<nccl_call_key>(calls_fd_, pids);
  delete_of<nccl_async_key>(async_fd_, pids);
  delete_of<nccl_comm_key>(comms_fd_, pids);
}

}  // namespace vigil::agent
