// Caching allocator: splitting, merging, caching, best fit, release, statistics and bad frees,
// checked against a backend that records every segment.
#include "backend/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace vigil {
namespace {

// Host memory, with a count of live segments and an optional limit to inject exhaustion.
class CountingBackend final : public SegmentSource {
 public:
  explicit CountingBackend(size_t limit = SIZE_MAX, int* live = nullptr) : limit_(limit), live_(live) {}
  void* allocate_segment(size_t bytes) override {
    if (used_ + bytes > limit_) return nullptr;
    used_ += bytes;
    if (live_) ++*live_;
    return host_.allocate_segment(bytes);
  }
  void free_segment(void* p, size_t bytes) override {
    used_ -= bytes;
    if (live_) --*live_;
    host_.free_segment(p, bytes);
  }

 private:
  HostSegmentSource host_;
  size_t limit_;
  size_t used_ = 0;
  int* live_;
};

constexpr size_t kSeg = 1 << 20;

TEST(CachingAllocator, SplitsASegmentAndMergesBack) {
  CachingAllocator a(std::make_unique<CountingBackend>(), kSeg, 512);
  void* p = a.allocate(1000);  // rounds to 1024
  void* q = a.allocate(3000);  // 3072, right after p in the same segment
  EXPECT_EQ(static_cast<char*>(q) - static_cast<char*>(p), 1024);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.segments, 1u);
  EXPECT_EQ(s.reserved_bytes, kSeg);
  EXPECT_EQ(s.allocated_bytes, 4096u);
  EXPECT_EQ(s.largest_free_block, kSeg - 4096);
  a.free(p);
  s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 3072u);
  // Free: 1024 before q and the tail after it: two pieces, the largest is the tail.
  EXPECT_EQ(s.largest_free_block, kSeg - 4096);
  EXPECT_NEAR(s.external_fragmentation(), 1.0 - double(kSeg - 4096) / double(kSeg - 3072), 1e-12);
  a.free(q);
  s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.largest_free_block, kSeg);  // everything merged back into one block
  EXPECT_EQ(s.external_fragmentation(), 0.0);
  EXPECT_EQ(s.segments, 1u);              // cached, not returned
}

TEST(CachingAllocator, ReusesCachedBlocksWithoutTheBackend) {
  CachingAllocator a(std::make_unique<CountingBackend>(), kSeg, 512);
  for (int i = 0; i < 100; ++i) a.free(a.allocate(64 << 10));
  EXPECT_EQ(a.stats().segment_allocs, 1u);
}

TEST(CachingAllocator, BestFitPicksTheSmallestHoleThatFits) {
  CachingAllocator a(std::make_unique<CountingBackend>(), kSeg, 512);
  void* small = a.allocate(2048);
  void* guard1 = a.allocate(512);
  void* big = a.allocate(8192);
  void* guard2 = a.allocate(512);
  a.free(big);
  a.free(small);
  EXPECT_EQ(a.allocate(2000), small);  // the 2048 hole, not the 8192 one
  a.free(small);
  a.free(guard1);
  a.free(guard2);
}

TEST(CachingAllocator, LargeRequestsGetTheirOwnSegmentAndReleaseReturnsIt) {
  int live = 0;
  CachingAllocator a(std::make_unique<CountingBackend>(SIZE_MAX, &live), kSeg, 512);
  void* p = a.allocate(5 * kSeg + 100);
  EXPECT_EQ(a.stats().reserved_bytes, (5 * kSeg + 100 + 4095) / 4096 * 4096);
  std::memset(p, 0xab, 5 * kSeg + 100);  // the whole range is usable
  a.free(p);
  EXPECT_EQ(live, 1);
  a.release_cached();
  EXPECT_EQ(live, 0);
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
  EXPECT_EQ(a.stats().segment_frees, 1u);
}

TEST(CachingAllocator, ExhaustionReleasesCacheThenThrows) {
  CachingAllocator a(std::make_unique<CountingBackend>(2 * kSeg), kSeg, 512);
  void* p = a.allocate(kSeg);  // segment 1
  a.free(p);                   // cached
  void* q = a.allocate(2 * kSeg - 4096);  // needs a new segment: fails, cache released, retried
  EXPECT_NE(q, nullptr);
  EXPECT_THROW(a.allocate(kSeg), std::bad_alloc);
  EXPECT_EQ(a.stats().alloc_failures, 1u);
  a.free(q);
}

TEST(CachingAllocator, BadFreesAreRejected) {
  CachingAllocator a(std::make_unique<CountingBackend>(), kSeg, 512);
  void* p = a.allocate(100);
  int x;
  EXPECT_THROW(a.free(&x), std::invalid_argument);
  a.free(p);
  EXPECT_THROW(a.free(p), std::invalid_argument);  // double free
}

TEST(CachingAllocator, RandomWorkloadKeepsTheBooksBalanced) {
  CachingAllocator a(std::make_unique<CountingBackend>(), kSeg, 512);
  std::mt19937 rng(1);
  std::vector<std::pair<void*, size_t>> live;
  size_t expect_allocated = 0;
  for (int i = 0; i < 5000; ++i) {
    if (live.empty() || rng() % 3 != 0) {
      size_t n = 1 + rng() % 200000;
      void* p = a.allocate(n);
      std::memset(p, i & 0xff, n);
      live.push_back({p, n});
      expect_allocated += (n + 511) / 512 * 512;
    } else {
      size_t k = rng() % live.size();
      a.free(live[k].first);
      expect_allocated -= (live[k].second + 511) / 512 * 512;
      live.erase(live.begin() + static_cast<long>(k));
    }
    ASSERT_EQ(a.stats().allocated_bytes, expect_allocated);
  }
  for (auto& [p, n] : live) a.free(p);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.blocks, 0u);
  EXPECT_EQ(s.largest_free_block, kSeg);  // every segment merged whole again
  EXPECT_EQ(s.external_fragmentation(), 1.0 - double(kSeg) / double(s.reserved_bytes));
}

TEST(CachingAllocator, BufferFreesOnDestruction) {
  CachingAllocator a(std::make_unique<CountingBackend>(), kSeg, 512);
  {
    AllocatorBuffer<float> b(a, 1000);
    b[999] = 1.0f;
    EXPECT_EQ(a.stats().allocated_bytes, 4096u);
    AllocatorBuffer<float> moved = std::move(b);
    EXPECT_EQ(moved.size(), 1000u);
  }
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
}

}  // namespace
}  // namespace vigil
