// Builds GGUF files in memory for tests: valid ones, and ones broken on purpose.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace vigil::test {

class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3, uint32_t alignment = 32) : alignment_(alignment) {
    put<uint32_t>(0x46554747);
    put<uint32_t>(version);
    counts_at_ = header_.size();
    put<uint64_t>(0);
    put<uint64_t>(0);
  }

  template <typename T>
  GgufBuilder& kv(const std::string& key, uint32_t type, T value) {
    key_header(key, type);
    put<T>(value);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& kv_string(const std::string& key, const std::string& value) {
    key_header(key, 8);
    put_string(value);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& kv_strings(const std::string& key, const std::vector<std::string>& values) {
    key_header(key, 9);
    put<uint32_t>(8);
    put<uint64_t>(values.size());
    for (const auto& v : values) put_string(v);
    ++n_kv_;
    return *this;
  }
  template <typename T>
  GgufBuilder& kv_array(const std::string& key, uint32_t elem_type, const std::vector<T>& values) {
    key_header(key, 9);
    put<uint32_t>(elem_type);
    put<uint64_t>(values.size());
    for (const T& v : values) put<T>(v);
    ++n_kv_;
    return *this;
  }

  // Adds a tensor whose data is `bytes` (appended to the data section, aligned).
  GgufBuilder& tensor(const std::string& name, uint32_t type, std::vector<uint64_t> dims,
                      const std::vector<uint8_t>& bytes) {
    while (data_.size() % alignment_) data_.push_back(0);
    infos_.push_back({name, type, std::move(dims), data_.size()});
    data_.insert(data_.end(), bytes.begin(), bytes.end());
    return *this;
  }
  // Adds a tensor info with an explicit offset and no data (for broken files).
  GgufBuilder& tensor_at(const std::string& name, uint32_t type, std::vector<uint64_t> dims,
                         uint64_t offset) {
    infos_.push_back({name, type, std::move(dims), offset});
    return *this;
  }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> out = header_;
    uint64_t n_t = infos_.size(), n_kv = n_kv_;
    std::memcpy(out.data() + counts_at_, &n_t, 8);
    std::memcpy(out.data() + counts_at_ + 8, &n_kv, 8);
    for (const auto& info : infos_) {
      append_string(out, info.name);
      append<uint32_t>(out, static_cast<uint32_t>(info.dims.size()));
      for (uint64_t d : info.dims) append<uint64_t>(out, d);
      append<uint32_t>(out, info.type);
      append<uint64_t>(out, info.offset);
    }
    while (out.size() % alignment_) out.push_back(0);
    out.insert(out.end(), data_.begin(), data_.end());
    return out;
  }

 private:
  struct Info {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> dims;
    uint64_t offset;
  };

  template <typename T>
  static void append(std::vector<uint8_t>& out, T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }
  static void append_string(std::vector<uint8_t>& out, const std::string& s) {
    append<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  template <typename T>
  void put(T v) { append<T>(header_, v); }
  void put_string(const std::string& s) { append_string(header_, s); }
  void key_header(const std::string& key, uint32_t type) {
    put_string(key);
    put<uint32_t>(type);
  }

  uint32_t alignment_;
  size_t counts_at_ = 0;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> header_;
  std::vector<Info> infos_;
  std::vector<uint8_t> data_;
};

}  // namespace vigil::test
