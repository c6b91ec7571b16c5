// Caching allocator for activations and the KV cache: segments from a backend (host memory here,
// cudaMalloc on GPUs) are split into blocks; freed blocks merge with free neighbours and stay
// cached for reuse instead of going back to the backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

namespace vigil {

// Where segments come from. Implementations report failure by returning nullptr.
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  virtual void* allocate_segment(size_t bytes) = 0;
  virtual void free_segment(void* ptr, size_t bytes) = 0;
};

// Page-aligned anonymous host memory (mmap): never touches the C++ heap.
class HostSegmentSource final : public SegmentSource {
 public:
  void* allocate_segment(size_t bytes) override;
  void free_segment(void* ptr, size_t bytes) override;
};

struct AllocatorStats {
  size_t reserved_bytes = 0;    // held in segments from the backend
  size_t allocated_bytes = 0;   // handed out in blocks
  size_t largest_free_block = 0;
  size_t segments = 0;
  size_t blocks = 0;            // allocated blocks
  uint64_t segment_allocs = 0;  // backend calls, cumulative
  uint64_t segment_frees = 0;
  uint64_t alloc_failures = 0;

  // 1 − largest free block / free bytes inside reserved memory (0 when nothing is free).
  double external_fragmentation() const;
};

class CachingAllocator {
 public:
  // Requests are rounded up to `granularity`; segments are at least `segment_bytes` (bigger
  // requests get a segment of their own size).
  explicit CachingAllocator(std::unique_ptr<SegmentSource> backend, size_t segment_bytes = 2 << 20,
                            size_t granularity = 512);
  ~CachingAllocator();  // returns every segment; blocks still allocated are a caller bug (asserted)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Never returns nullptr: throws std::bad_alloc when the backend has nothing left, after
  // releasing the cached free segments and trying once more.
  void* allocate(size_t bytes);
  void free(void* ptr);
  // Gives wholly free segments back to the backend (PyTorch's empty_cache).
  void release_cached();
  AllocatorStats stats() const;

 private:
  struct Block {
    char* segment;        // start of the segment the block lives in
    size_t segment_bytes;
    size_t bytes;
    bool free;
  };
  void* allocate_locked(size_t bytes);
  void release_cached_locked();
  void snapshot_locked() const;  // fires the alloc_snapshot probe
  size_t largest_free_locked() const;

  std::unique_ptr<SegmentSource> backend_;
  const size_t segment_bytes_;
  const size_t granularity_;
  mutable std::mutex mu_;
  std::map<char*, Block> blocks_;                   // every block by address, segments contiguous
  std::set<std::pair<size_t, char*>> free_blocks_;  // (size, address): best fit by lower_bound
  AllocatorStats stats_;
};

// A buffer of T from the allocator, freed on destruction.
template <typename T>
class AllocatorBuffer {
 public:
  AllocatorBuffer() = default;
  AllocatorBuffer(CachingAllocator& alloc, size_t n)
      : alloc_(&alloc), data_(static_cast<T*>(alloc.allocate(n * sizeof(T)))), size_(n) {}
  ~AllocatorBuffer() {
    if (data_) alloc_->free(data_);
  }
  AllocatorBuffer(AllocatorBuffer&& o) noexcept
      : alloc_(o.alloc_), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AllocatorBuffer& operator=(AllocatorBuffer&& o) noexcept {
    if (this != &o) {
      if (data_) alloc_->free(data_);
      alloc_ = o.alloc_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  CachingAllocator* alloc_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vigil
