// Bookkeeping of a reserved virtual address range for the VMM memory backend: first-fit
// placement of mapped segments, coalescing on free. GPU-free, so it is unit-tested anywhere.
#pragma once

#include <cstddef>
#include <map>
#include <optional>

namespace vigil {

class VaRanges {
 public:
  // Offsets in [0, size), aligned to `granularity` (the driver's mapping granularity).
  VaRanges(size_t size, size_t granularity);

  // Lowest free offset that holds `bytes` (rounded up to the granularity), or nullopt. Lowest
  // first keeps live segments packed at the start, so the range grows like one expandable segment.
  std::optional<size_t> take(size_t bytes);
  // Gives back a range returned by take (same bytes); throws std::invalid_argument otherwise.
  void give(size_t offset, size_t bytes);

  size_t round(size_t bytes) const { return (bytes + granularity_ - 1) / granularity_ * granularity_; }
  size_t size() const { return size_; }
  size_t used() const { return used_; }
  size_t high_water() const;  // end of the highest taken range (0 when none)

 private:
  size_t size_;
  size_t granularity_;
  size_t used_ = 0;
  std::map<size_t, size_t> free_;   // offset -> bytes, non-adjacent
  std::map<size_t, size_t> taken_;  // offset -> bytes
};

}  // namespace vigil
