// First-fit virtual address bookkeeping for the VMM memory backend (see va_ranges.h).
#include "backend/cuda/va_ranges.h"

#include <iterator>
#include <stdexcept>
#include <string>

namespace vigil {

VaRanges::VaRanges(size_t size, size_t granularity) : size_(size), granularity_(granularity) {
  if (granularity == 0 || size == 0 || size % granularity != 0)
    throw std::invalid_argument("va ranges: size must be a positive multiple of the granularity");
  free_[0] = size;
}

std::optional<size_t> VaRanges::take(size_t bytes) {
  if (bytes == 0) return std::nullopt;
  const size_t need = round(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const size_t offset = it->first, left = it->second - need;
    free_.erase(it);
    if (left) free_[offset + need] = left;
    taken_[offset] = need;
    used_ += need;
    return offset;
  }
  return std::nullopt;
}

void VaRanges::give(size_t offset, size_t bytes) {
  auto t = taken_.find(offset);
  if (t == taken_.end() || t->second != round(bytes))
    throw std::invalid_argument("va ranges: offset " + std::to_string(offset) + " was not taken with that size");
  const size_t len = t->second;
  taken_.erase(t);
  used_ -= len;
  auto it = free_.emplace(offset, len).first;
  // Merge with the following and the preceding free ranges.
  if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

size_t VaRanges::high_water() const {
  if (taken_.empty()) return 0;
  auto last = std::prev(taken_.end());
  return last->first + last->second;
}

}  // namespace vigil
