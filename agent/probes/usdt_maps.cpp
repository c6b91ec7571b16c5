// Reads and trims usdt.bpf.c's maps.
#include "probes/usdt_maps.h"

#include <bpf/bpf.h>

#include "probes/bpf_util.h"

namespace vigil::agent {

UsdtSnapshot UsdtMaps::read() const {
  UsdtSnapshot s;
  for (const auto& k : map_keys<usdt_alloc_key>(allocators_fd_)) {
    usdt_alloc_state v{};
    if (bpf_map_lookup_elem(allocators_fd_, &k, &v) == 0) s.allocators.emplace_back(k, v);
  }
  return s;
}

void UsdtMaps::forget(const std::set<uint32_t>& pids) const {
  if (pids.empty()) return;
  for (const auto& k : map_keys<usdt_alloc_key>(allocators_fd_))
    if (pids.count(k.tgid)) bpf_map_delete_elem(allocators_fd_, &k);
  struct BlockKey {  // usdt.bpf.c's block_key
    __u32 tgid, allocator;
    __u64 ptr;
  };
  for (const auto& k : map_keys<BlockKey>(blocks_fd_))
    if (pids.count(k.tgid)) bpf_map_delete_elem(blocks_fd_, &k);
}

}  // namespace vigil::agent
