// A whole file's bytes in memory: the file's own read-only mapping, or an anonymous copy in
// transparent huge pages (mapped_file.h says why).
#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace vigil {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Synchronous collapse into huge pages (Linux 6.1; include/uapi/asm-generic/mman-common.h); not
// in every libc's headers yet.
constexpr int kMadvCollapse = 25;

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// The active choice of /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close > open ? line.substr(open + 1, close - open - 1) : "";
}

std::string megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / 1e6);
  return buf;
}

}  // namespace

std::string_view weights_placement_name(WeightsPlacement p) {
  return p == WeightsPlacement::kHugePages ? "huge_pages" : "page_cache";
}

std::optional<WeightsPlacement> parse_weights_placement(std::string_view name) {
  for (WeightsPlacement p : {WeightsPlacement::kHugePages, WeightsPlacement::kPageCache})
    if (weights_placement_name(p) == name) return p;
  return std::nullopt;
}

uint64_t smaps_pmd_mapped_bytes(const void* begin, size_t size) {
  const auto lo = reinterpret_cast<uintptr_t>(begin), hi = lo + size;
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  uint64_t kib = 0;
  while (std::getline(in, line)) {
    uintptr_t start = 0, end = 0;
    char perms[8];
    // A mapping's header: "start-end perms offset dev inode [path]"; its fields: "Name:  N kB".
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s", &start, &end, perms) == 3) {
      inside = start < hi && end > lo;
      continue;
    }
    if (!inside) continue;
    for (const char* field : {"AnonHugePages:", "ShmemPmdMapped:", "FilePmdMapped:"})
      if (line.rfind(field, 0) == 0) kib += std::strtoull(line.c_str() + std::strlen(field), nullptr, 10);
  }
  return kib * 1024;
}

MappedFile::MappedFile(const std::string& path, WeightsPlacement wanted) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  try {
    if (::fstat(fd, &st) != 0) throw std::runtime_error(path + ": cannot stat: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(path + ": not a regular file");
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0 && !(wanted == WeightsPlacement::kHugePages && copy_to_huge_pages(fd))) map_file(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

void MappedFile::map_file(int fd) {
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) throw std::runtime_error(path_ + ": cannot mmap: " + std::strerror(errno));
  region_ = p;
  region_size_ = size_;
  data_ = static_cast<const uint8_t*>(p);
  placement_ = WeightsPlacement::kPageCache;
}

bool MappedFile::copy_to_huge_pages(int fd) {
  if (const std::string mode = thp_mode(); mode != "always" && mode != "madvise") {
    fallback_reason_ = "transparent huge pages are " + (mode.empty() ? "not built into this kernel" : "'" + mode + "'") +
                       " (/sys/kernel/mm/transparent_hugepage/enabled)";
    return false;
  }
  // Over-allocate by one huge page, then trim both ends so the copy starts on a 2 MiB boundary:
  // only aligned 2 MiB ranges can be PMD-mapped.
  const size_t rounded = (size_ + kHugePage - 1) / kHugePage * kHugePage;
  void* raw = ::mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    fallback_reason_ = errno_text("mmap");
    return false;
  }
  auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) & ~(kHugePage - 1));
  const size_t head = static_cast<size_t>(aligned - static_cast<uint8_t*>(raw));
  if (head > 0) ::munmap(raw, head);
  ::munmap(aligned + rounded, kHugePage - head);  // head < kHugePage: never empty
  region_ = aligned;
  region_size_ = rounded;
  if (::madvise(aligned, rounded, MADV_HUGEPAGE) != 0) {
    fallback_reason_ = errno_text("madvise(MADV_HUGEPAGE)");
    release();
    return false;
  }
  // Each first touch of a 2 MiB range faults in a whole huge page (THP "madvise" mode compacts
  // for it), which the kernel zeroes before pread fills it from the page cache: on one thread
  // ~40 ms for 100 MB, most of a start-up; every core takes a share of whole huge pages.
  const size_t pages = rounded / kHugePage;
  const size_t n_threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::min<size_t>(pages, 8));
  std::vector<std::string> errors(n_threads);
  auto fill = [&](size_t t) {
    const size_t begin = std::min(size_, pages * t / n_threads * kHugePage);
    const size_t end = std::min(size_, pages * (t + 1) / n_threads * kHugePage);
    for (size_t done = begin; done < end;) {
      const ssize_t n = ::pread(fd, aligned + done, std::min(end - done, kHugePage), static_cast<off_t>(done));
      if (n <= 0) {
        errors[t] = n < 0 ? std::strerror(errno) : "the file shrank while it was read";
        return;
      }
      done += static_cast<size_t>(n);
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < n_threads; ++t) helpers.emplace_back(fill, t);
  fill(0);
  for (auto& h : helpers) h.join();
  for (const std::string& why : errors)
    if (!why.empty()) {
      release();
      throw std::runtime_error(path_ + ": cannot read: " + why);
    }
  // Faults that found no free huge page got 4 KiB pages; collapsing now (Linux 6.1+) beats waiting
  // for khugepaged. Errors only mean fewer huge pages, which the count below says.
  if (smaps_pmd_mapped_bytes(aligned, size_) < size_ / kHugePage * kHugePage) ::madvise(aligned, rounded, kMadvCollapse);
  if (smaps_pmd_mapped_bytes(aligned, size_) == 0) {
    fallback_reason_ = "the kernel gave no huge page (memory too fragmented, or THP defrag off)";
    release();
    return false;
  }
  if (::mprotect(aligned, rounded, PROT_READ) != 0) {
    const std::string why = errno_text("mprotect");
    release();
    throw std::runtime_error(path_ + ": " + why);
  }
  data_ = aligned;
  placement_ = WeightsPlacement::kHugePages;
  return true;
}

void MappedFile::release() {
  if (region_) ::munmap(region_, region_size_);
  region_ = nullptr;
  region_size_ = 0;
  data_ = nullptr;
}

uint64_t MappedFile::pmd_mapped_bytes() const {
  // The copy's last huge page runs past the file's end: count the file's bytes only.
  return data_ ? std::min<uint64_t>(size_, smaps_pmd_mapped_bytes(data_, size_)) : 0;
}

std::string MappedFile::describe() const {
  std::string s = std::string(placement_ == WeightsPlacement::kHugePages ? "huge pages" : "page cache") + " (" +
                  megabytes(pmd_mapped_bytes()) + " of " + megabytes(size_) + " MB PMD-mapped";
  if (!fallback_reason_.empty()) s += "; no huge pages: " + fallback_reason_;
  return s + ")";
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      region_(std::exchange(other.region_, nullptr)),
      region_size_(std::exchange(other.region_size_, 0)),
      placement_(other.placement_),
      fallback_reason_(std::move(other.fallback_reason_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    region_ = std::exchange(other.region_, nullptr);
    region_size_ = std::exchange(other.region_size_, 0);
    placement_ = other.placement_;
    fallback_reason_ = std::move(other.fallback_reason_);
  }
  return *this;
}

}  // namespace vigil
