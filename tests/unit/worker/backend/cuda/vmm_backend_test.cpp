// The VMM memory backend under the CachingAllocator, on a fake driver (no GPU): segments packed
// into the reserved range, every cuMemCreate mapped, unmapped and released once, failures of
// each driver step undone without leaks and reported as the allocator's bad_alloc.
#include <gtest/gtest.h>

#include <map>
#include <new>

#include "backend/cuda/cuda_memory.h"

namespace vigil::cuda {
namespace {

constexpr size_t kG = 2 << 20;
constexpr CUdeviceptr kBase = 0x7f0000000000ull;

// The fake driver's state; reset by each test's fixture.
struct Fake {
  std::map<CUmemGenericAllocationHandle, size_t> created;   // live physical allocations
  std::map<CUdeviceptr, CUmemGenericAllocationHandle> mapped;
  CUmemGenericAllocationHandle next = 1;
  CUresult create_result = CUDA_SUCCESS, map_result = CUDA_SUCCESS;
  int creates = 0, syncs = 0;
  bool reserved = false;
};
Fake* fake = nullptr;

DriverApi fake_driver() {
  DriverApi d;
  d.mem_granularity = [](size_t* g, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) {
    *g = kG;
    return CUDA_SUCCESS;
  };
  d.mem_reserve = [](CUdeviceptr* p, size_t, size_t, CUdeviceptr, unsigned long long) {
    fake->reserved = true;
    *p = kBase;
    return CUDA_SUCCESS;
  };
  d.mem_address_free = [](CUdeviceptr, size_t) {
    fake->reserved = false;
    return CUDA_SUCCESS;
  };
  d.mem_create = [](CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp*, unsigned long long) {
    ++fake->creates;
    if (fake->create_result != CUDA_SUCCESS) return fake->create_result;
    *h = fake->next++;
    fake->created[*h] = size;
    return CUDA_SUCCESS;
  };
  d.mem_release = [](CUmemGenericAllocationHandle h) {
    return fake->created.erase(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  };
  d.mem_map = [](CUdeviceptr p, size_t size, size_t, CUmemGenericAllocationHandle h, unsigned long long) {
    if (fake->map_result != CUDA_SUCCESS) return fake->map_result;
    if (fake->created.at(h) != size) return CUDA_ERROR_INVALID_VALUE;
    fake->mapped[p] = h;
    return CUDA_SUCCESS;
  };
  d.mem_unmap = [](CUdeviceptr p, size_t) { return fake->mapped.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; };
  d.mem_set_access = [](CUdeviceptr, size_t, const CUmemAccessDesc* desc, size_t count) {
    return count == 1 && desc->flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  };
  d.ctx_synchronize = [] {
    ++fake->syncs;
    return CUDA_SUCCESS;
  };
  return d;
}

class VmmBackend : public ::testing::Test {
 protected:
  void SetUp() override { fake = &state; }
  void TearDown() override { fake = nullptr; }
  Fake state;
  DriverApi driver = fake_driver();
};

TEST_F(VmmBackend, SegmentsArePackedMappedAndReleased) {
  {
    auto backend = std::make_unique<VmmSegmentSource>(0, 16 * kG, driver);
    VmmSegmentSource* vmm = backend.get();
    CachingAllocator alloc(std::move(backend));
    void* a = alloc.allocate(1 << 20);
    void* b = alloc.allocate(3 * kG / 2 + 1);  // larger than a segment: its own, rounded to 2 granules
    EXPECT_EQ(reinterpret_cast<CUdeviceptr>(a), kBase);
    EXPECT_EQ(reinterpret_cast<CUdeviceptr>(b), kBase + kG);  // right after the first: one growing range
    EXPECT_EQ(state.mapped.size(), 2u);
    EXPECT_EQ(state.created.size(), 2u);
    EXPECT_EQ(vmm->ranges().used(), 3 * kG);
    EXPECT_EQ(alloc.stats().segment_allocs, 2u);
    alloc.free(a);
    alloc.free(b);
    alloc.release_cached();
    EXPECT_TRUE(state.mapped.empty());
    EXPECT_TRUE(state.created.empty());
    EXPECT_EQ(vmm->ranges().used(), 0u);
    EXPECT_EQ(state.syncs, 2);  // the device is idle before each unmap
  }
  EXPECT_FALSE(state.reserved);  // the address range goes with the backend
}

TEST_F(VmmBackend, CreateFailureIsBadAllocAndLeavesNothing) {
  auto backend = std::make_unique<VmmSegmentSource>(0, 16 * kG, driver);
  VmmSegmentSource* vmm = backend.get();
  CachingAllocator alloc(std::move(backend));
  state.create_result = CUDA_ERROR_OUT_OF_MEMORY;
  EXPECT_THROW(alloc.allocate(kG), std::bad_alloc);
  EXPECT_EQ(vmm->last_error(), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(vmm->ranges().used(), 0u);
  EXPECT_EQ(alloc.stats().alloc_failures, 1u);
  state.create_result = CUDA_SUCCESS;
  void* p = alloc.allocate(kG);
  EXPECT_EQ(reinterpret_cast<CUdeviceptr>(p), kBase);  // the range was given back
  alloc.free(p);
}

TEST_F(VmmBackend, MapFailureReleasesThePhysicalAllocation) {
  auto backend = std::make_unique<VmmSegmentSource>(0, 16 * kG, driver);
  CachingAllocator alloc(std::move(backend));
  state.map_result = CUDA_ERROR_INVALID_VALUE;
  EXPECT_THROW(alloc.allocate(kG), std::bad_alloc);
  EXPECT_GE(state.creates, 1);
  EXPECT_TRUE(state.created.empty());
  EXPECT_TRUE(state.mapped.empty());
}

TEST_F(VmmBackend, ExhaustedAddressRangeAsksTheDriverForNothing) {
  auto backend = std::make_unique<VmmSegmentSource>(0, 2 * kG, driver);
  CachingAllocator alloc(std::move(backend));
  EXPECT_THROW(alloc.allocate(3 * kG), std::bad_alloc);
  EXPECT_EQ(state.creates, 0);
}

}  // namespace
}  // namespace vigil::cuda
