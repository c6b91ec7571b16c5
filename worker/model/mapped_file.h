// Read-only memory map of a whole file (model weights are used in place, never copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace vigil {

class MappedFile {
 public:
  // Throws std::runtime_error naming the path and the failing call.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vigil
