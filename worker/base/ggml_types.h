// GGML tensor types as stored in GGUF files: ids, names and block layouts (ggml/include/ggml.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace vigil {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;
  uint32_t block_size;  // elements per block
  uint32_t type_size;   // bytes per block
};

// Layout of a known type, or nullopt for ids this reader does not know.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t id);
std::string_view ggml_type_name(GgmlType type);

// Bytes of one row of n elements (n must be a multiple of the block size).
inline uint64_t ggml_row_bytes(const GgmlTypeTraits& t, uint64_t n) {
  return n / t.block_size * t.type_size;
}

// A weight matrix as stored in the GGUF file: `rows` rows of `cols` elements each, row-major,
// every row a sequence of `type` blocks. Points into the mapped file
// (or any buffer laid out the same way).
struct WeightView {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  // Of a known type (every loaded weight's type is checked at load).
  uint64_t row_bytes() const {
    return ggml_row_bytes(*ggml_type_traits(static_cast<uint32_t>(type)), static_cast<uint64_t>(cols));
  }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes(); }
};

}  // namespace vigil
