// A whole file's bytes in memory, read-only: the model's weights are used in place, where they
// sit. Decode reads every weight once per token, so where they sit sets its speed: a file mmap
// is shared through the page cache but made of 4 KiB pages (hardware prefetchers stop at each
// page boundary and every page costs a TLB walk); an anonymous copy in transparent huge pages
// streams faster and is private to the process (docs/decisions.md, "Weights in huge pages").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace vigil {

enum class WeightsPlacement {
  kHugePages,  // an anonymous 2 MiB-aligned copy with MADV_HUGEPAGE (MADV_COLLAPSE if needed)
  kPageCache,  // the file's own mapping, shared with every process that maps it
};
std::string_view weights_placement_name(WeightsPlacement p);  // "huge_pages", "page_cache"
std::optional<WeightsPlacement> parse_weights_placement(std::string_view name);

class MappedFile {
 public:
  // Throws std::runtime_error naming the path and the failing call. kHugePages falls back to the
  // file's mapping when the kernel gives no huge page (placement() then says kPageCache and
  // fallback_reason() why).
  explicit MappedFile(const std::string& path, WeightsPlacement wanted = WeightsPlacement::kPageCache);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  WeightsPlacement placement() const { return placement_; }
  const std::string& fallback_reason() const { return fallback_reason_; }
  // Bytes of the mapping the kernel maps with PMD (2 MiB) entries now, from /proc/self/smaps.
  uint64_t pmd_mapped_bytes() const;
  // "huge pages (96.4 of 96.4 MB PMD-mapped)", "page cache (0.0 of 96.4 MB PMD-mapped; ...why)".
  std::string describe() const;

 private:
  void map_file(int fd);
  // False (nothing kept) when no huge page could be had; fallback_reason_ says why.
  bool copy_to_huge_pages(int fd);
  void release();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* region_ = nullptr;  // what munmap takes: the file mapping, or the aligned anonymous copy
  size_t region_size_ = 0;
  WeightsPlacement placement_ = WeightsPlacement::kPageCache;
  std::string fallback_reason_;
};

// Sums AnonHugePages, ShmemPmdMapped and FilePmdMapped of the mappings of /proc/self/smaps that
// overlap [begin, begin + size): what the kernel maps with 2 MiB entries there.
uint64_t smaps_pmd_mapped_bytes(const void* begin, size_t size);

}  // namespace vigil
