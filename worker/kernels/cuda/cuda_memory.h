// Device memory backends for the CachingAllocator: cudaMalloc segments, or virtual-memory
// segments (cuMemCreate + cuMemMap into one reserved address range, growing like PyTorch's
// expandable segments). The agent's driver probes see both kinds.
#pragma once

#include <cuda.h>

#include <map>
#include <mutex>

#include "backend/va_ranges.h"
#include "driver_api.h"
#include "engine/caching_allocator.h"

namespace vigil::cuda {

class CudaMemoryBackend final : public MemoryBackend {
 public:
  explicit CudaMemoryBackend(int device) : device_(device) {}
  void* allocate_segment(size_t bytes) override;  // nullptr when cudaMalloc fails
  void free_segment(void* ptr, size_t bytes) override;

 private:
  int device_;
};

class VmmMemoryBackend final : public MemoryBackend {
 public:
  // Reserves `reserve_bytes` of device address space up front; segments are mapped into it.
  // `driver` must outlive the backend (DriverApi::get(), or fakes in tests).
  VmmMemoryBackend(int device, size_t reserve_bytes, const DriverApi& driver = DriverApi::get());
  ~VmmMemoryBackend() override;
  VmmMemoryBackend(const VmmMemoryBackend&) = delete;
  VmmMemoryBackend& operator=(const VmmMemoryBackend&) = delete;

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
