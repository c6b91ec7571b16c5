// Caching allocator for activations and the KV cache: segments from a backend (host memory here,
// cudaMalloc on GPUs) are split into blocks; freed blocks merge with free neighbours and stay
// cached for reuse instead of going back to the backend.
#include "backend/caching_allocator.h"

#include <sys/mman.h>

#include <cassert>
#include <new>
#include <stdexcept>

#include "base/probes.h"

namespace vigil {
namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
constexpr size_t kPage = 4096;

}  // namespace

void* HostSegmentSource::allocate_segment(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void HostSegmentSource::free_segment(void* ptr, size_t bytes) { ::munmap(ptr, bytes); }

double AllocatorStats::external_fragmentation() const {
  const size_t free_bytes = reserved_bytes - allocated_bytes;
  if (free_bytes == 0) return 0.0;
  return 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(free_bytes);
}

CachingAllocator::CachingAllocator(std::unique_ptr<SegmentSource> backend, size_t segment_bytes,
                                   size_t granularity)
    : backend_(std::move(backend)), segment_bytes_(round_up(segment_bytes, kPage)), granularity_(granularity) {
  if (granularity_ == 0 || (granularity_ & (granularity_ - 1)) != 0 || granularity_ > kPage)
    throw std::invalid_argument("allocator granularity must be a power of two up to 4096");
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mu_);
  assert(stats_.blocks == 0 && "CachingAllocator destroyed with blocks still allocated");
  for (auto& [addr, block] : blocks_)
    if (addr == block.segment) backend_->free_segment(block.segment, block.segment_bytes);
}

void* CachingAllocator::allocate(size_t bytes) {
  std::lock_guard lock(mu_);
  if (void* p = allocate_locked(bytes)) return p;
  // The backend is out: give back what is cached whole and try once more (PyTorch does the same).
  release_cached_locked();
  if (void* p = allocate_locked(bytes)) return p;
  ++stats_.alloc_failures;
  throw std::bad_alloc();
}

void* CachingAllocator::allocate_locked(size_t bytes) {
  const size_t size = round_up(bytes == 0 ? 1 : bytes, granularity_);
  auto fit = free_blocks_.lower_bound({size, nullptr});
  char* addr;
  if (fit != free_blocks_.end()) {
    addr = fit->second;
    free_blocks_.erase(fit);
  } else {
    const size_t seg_bytes = size > segment_bytes_ ? round_up(size, kPage) : segment_bytes_;
    addr = static_cast<char*>(backend_->allocate_segment(seg_bytes));
    if (!addr) return nullptr;
    blocks_.emplace(addr, Block{addr, seg_bytes, seg_bytes, true});
    stats_.reserved_bytes += seg_bytes;
    ++stats_.segments;
    ++stats_.segment_allocs;
    VIGIL_PROBE(alloc_segment_alloc, reinterpret_cast<uintptr_t>(addr), seg_bytes);
  }
  Block& block = blocks_.at(addr);
  if (block.bytes - size >= granularity_) {
    // Split: the tail stays free in the same segment.
    blocks_.emplace(addr + size, Block{block.segment, block.segment_bytes, block.bytes - size, true});
    free_blocks_.insert({block.bytes - size, addr + size});
    block.bytes = size;
  }
  block.free = false;
  stats_.allocated_bytes += block.bytes;
  ++stats_.blocks;
  VIGIL_PROBE(alloc_block_alloc, reinterpret_cast<uintptr_t>(addr), block.bytes);
  snapshot_locked();
  return addr;
}

void CachingAllocator::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard lock(mu_);
  auto it = blocks_.find(static_cast<char*>(ptr));
  if (it == blocks_.end() || it->second.free)
    throw std::invalid_argument("CachingAllocator::free of a pointer it did not hand out");
  Block& block = it->second;
  block.free = true;
  stats_.allocated_bytes -= block.bytes;
  --stats_.blocks;
  VIGIL_PROBE(alloc_block_free, reinterpret_cast<uintptr_t>(ptr), block.bytes);

  // Merge with the next block, then with the previous one, within the same segment.
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.free && next->second.segment == block.segment) {
    free_blocks_.erase({next->second.bytes, next->first});
    block.bytes += next->second.bytes;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.free && prev->second.segment == block.segment) {
      free_blocks_.erase({prev->second.bytes, prev->first});
      prev->second.bytes += block.bytes;
      blocks_.erase(it);
      it = prev;
    }
  }
  free_blocks_.insert({it->second.bytes, it->first});
  snapshot_locked();
}

void CachingAllocator::release_cached() {
  std::lock_guard lock(mu_);
  release_cached_locked();
  snapshot_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    Block& b = it->second;
    if (b.free && it->first == b.segment && b.bytes == b.segment_bytes) {
      free_blocks_.erase({b.bytes, it->first});
      VIGIL_PROBE(alloc_segment_free, reinterpret_cast<uintptr_t>(b.segment), b.segment_bytes);
      backend_->free_segment(b.segment, b.segment_bytes);
      stats_.reserved_bytes -= b.segment_bytes;
      --stats_.segments;
      ++stats_.segment_frees;
      it = blocks_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t CachingAllocator::largest_free_locked() const {
  return free_blocks_.empty() ? 0 : free_blocks_.rbegin()->first;
}

void CachingAllocator::snapshot_locked() const {
  VIGIL_PROBE(alloc_snapshot, stats_.reserved_bytes, stats_.allocated_bytes, largest_free_locked());
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  // Each read also fires the snapshot probe: an agent that attached after the last allocation
  // (restarted, or discovering a running worker in its container) learns the state at the next
  // /metrics render instead of never.
  snapshot_locked();
  AllocatorStats s = stats_;
  s.largest_free_block = largest_free_locked();
  return s;
}

}  // namespace vigil
