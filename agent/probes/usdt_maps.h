// The owner of usdt.bpf.c's maps on the user side: reads the allocators' state into a snapshot for
// the allocator collector and forgets exited processes. No other code walks or writes these maps.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "usdt_events.h"

namespace vigil::agent {

// Each (process, allocator, device)'s state, as read at one moment, in key order.
struct UsdtSnapshot {
  std::vector<std::pair<usdt_alloc_key, usdt_alloc_state>> allocators;
};

// What the allocator collector reads: the maps, or a snapshot a unit test made.
class UsdtReader {
 public:
  virtual ~UsdtReader() = default;
  virtual UsdtSnapshot read() const = 0;
};

class UsdtMaps : public UsdtReader {
 public:
  UsdtMaps(int allocators_fd, int blocks_fd) : allocators_fd_(allocators_fd), blocks_fd_(blocks_fd) {}
  UsdtSnapshot read() const override;
  // Deletes the allocator state and live blocks of PIDS.
  void forget(const std::set<uint32_t>& pids) const;

 private:
  int allocators_fd_, blocks_fd_;
};

}  // namespace vigil::agent
