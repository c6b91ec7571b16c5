// GGUF v2/v3 reader (ggml/docs/gguf.md): metadata and tensor inventory over a memory map, zero-copy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/ggml_types.h"
#include "model/mapped_file.h"

namespace vigil {

// Every problem with a model file: the message names the file and what is wrong.
class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType type);

// One metadata value. Strings and arrays point into the mapped file.
struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  uint64_t u = 0;  // unsigned integers and bool
  int64_t i = 0;   // signed integers
  double f = 0;    // floats
  std::string_view str;
  // Arrays: element type and count; numeric elements stay in the file (raw),
  // string elements are listed (strings); nested arrays are counted, not decoded.
  GgufValueType elem_type = GgufValueType::UINT8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;
  std::vector<std::string_view> strings;
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  uint32_t n_dims = 0;
  uint64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the row length (innermost)
  uint64_t offset = 0;            // from the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;

  uint64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;
};

class GgufFile {
 public:
  // Maps (or copies, mapped_file.h) and parses a file; throws GgufError naming the problem.
  static GgufFile open(const std::string& path, WeightsPlacement placement = WeightsPlacement::kPageCache);
  // Parses bytes owned by the caller (they must outlive the result); for tests and fuzzing.
  static GgufFile parse(std::span<const uint8_t> bytes, const std::string& name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }
  const MappedFile* mapping() const { return map_.get(); }  // null when parsing caller-owned bytes

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;
  const GgufTensor* find_tensor(std::string_view name) const;

  // Typed access; throw GgufError naming the key when missing or of another type.
  uint64_t get_uint(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::string_view get_string(std::string_view key) const;
  std::span<const std::string_view> get_string_array(std::string_view key) const;
  std::vector<int32_t> get_int_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  // As above with a default when the key is absent (a present key of the wrong type still throws).
  uint64_t get_uint_or(std::string_view key, uint64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;

  // The tensor with this name, which must have this shape (unused trailing dims are 1);
  // throws "tensor 'x' not found" or "tensor 'x' has shape [..], expected [..]".
  const GgufTensor& require_tensor(std::string_view name, std::initializer_list<uint64_t> shape) const;

  [[noreturn]] void fail(const std::string& what) const;

 private:
  GgufFile() = default;
  void parse_all();

  std::shared_ptr<MappedFile> map_;  // absent when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace vigil
