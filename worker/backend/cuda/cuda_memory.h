// Device memory backends for the CachingAllocator: cudaMalloc segments, or virtual-memory
// segments (cuMemCreate + cuMemMap into one reserved address range, growing like PyTorch's
// expandable segments). The agent's driver probes see both kinds.
#pragma once

#include <cuda.h>

#include <map>
#include <mutex>

#include "backend/caching_allocator.h"
#include "backend/cuda/driver_api.h"
#include "backend/cuda/va_ranges.h"

namespace vigil::cuda {

class CudaSegmentSource final : public SegmentSource {
 public:
  explicit CudaSegmentSource(int device) : device_(device) {}
  void* allocate_segment(size_t bytes) override;  // nullptr when cudaMalloc fails
  void free_segment(void* ptr, size_t bytes) override;

 private:
  int device_;
};

class VmmSegmentSource final : public SegmentSource {
 public:
  // Reserves `reserve_bytes` of device address space up front; segments are mapped into it.
  // `driver` must outlive the backend (DriverApi::get(), or fakes in tests).
  VmmSegmentSource(int device, size_t reserve_bytes, const DriverApi& driver = DriverApi::get());
  ~VmmSegmentSource() override;
  VmmSegmentSource(const VmmSegmentSource&) = delete;
  VmmSegmentSource& operator=(const VmmSegmentSource&) = delete;

  void* allocate_segment(size_t bytes) override;  // nullptr when out of memory or address space
  void free_segment(void* ptr, size_t bytes) override;
  CUresult last_error() const { return last_error_; }
  const VaRanges& ranges() const { return va_; }

 private:
  const DriverApi& drv_;
  int device_;
  size_t granularity_ = 0;
  CUdeviceptr base_ = 0;
  VaRanges va_;
  std::mutex mu_;
  std::map<size_t, CUmemGenericAllocationHandle> handles_;  // offset -> physical allocation
  CUresult last_error_ = CUDA_SUCCESS;
};

}  // namespace vigil::cuda
