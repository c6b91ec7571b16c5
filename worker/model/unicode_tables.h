// Unicode letter/number code point ranges (generated into unicode_tables.cpp) for the pre-tokenizer.
#pragma once

#include <cstdint>
#include <span>

namespace vigil::unicode_tables {

struct Range {
  uint32_t first;  // inclusive
  uint32_t last;   // inclusive
};

extern const char kUnicodeVersion[];
// Sorted, disjoint, non-adjacent ranges: general category L* and N*.
extern const std::span<const Range> letters;
extern const std::span<const Range> numbers;

}  // namespace vigil::unicode_tables
