// Device memory backends for the CachingAllocator (see cuda_memory.h).
#include "backend/cuda/cuda_memory.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"

namespace vigil::cuda {
namespace {

void check_cu(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) throw std::runtime_error(std::string(call) + " failed: CUresult " + std::to_string(r));
}

CUmemAllocationProp device_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

size_t granularity_of(const DriverApi& drv, int device) {
  const CUmemAllocationProp prop = device_prop(device);
  size_t g = 0;
  check_cu(drv.mem_granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
  return g;
}

}  // namespace

void* CudaSegmentSource::allocate_segment(size_t bytes) {
  VIGIL_CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // out of memory is not sticky: clear it so later calls see success
    return nullptr;
  }
  return p;
}

void CudaSegmentSource::free_segment(void* ptr, size_t) { VIGIL_CUDA_CHECK(cudaFree(ptr)); }

VmmSegmentSource::VmmSegmentSource(int device, size_t reserve_bytes, const DriverApi& driver)
    : drv_(driver),
      device_(device),
      granularity_(granularity_of(drv_, device)),
      va_((reserve_bytes + granularity_ - 1) / granularity_ * granularity_, granularity_) {
  check_cu(drv_.mem_reserve(&base_, va_.size(), granularity_, 0, 0), "cuMemAddressReserve");
}

VmmSegmentSource::~VmmSegmentSource() {
  // The CachingAllocator returns every segment before its backend goes, so only the range is left.
  (void)drv_.mem_address_free(base_, va_.size());
}

void* VmmSegmentSource::allocate_segment(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<size_t> offset = va_.take(bytes);
  if (!offset) return nullptr;
  const size_t len = va_.round(bytes);
  const CUmemAllocationProp prop = device_prop(device_);
  CUmemGenericAllocationHandle h = 0;
  CUresult r = drv_.mem_create(&h, len, &prop, 0);
  if (r == CUDA_SUCCESS) {
    r = drv_.mem_map(base_ + *offset, len, 0, h, 0);
    if (r == CUDA_SUCCESS) {
      CUmemAccessDesc access{};
      access.location = prop.location;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      r = drv_.mem_set_access(base_ + *offset, len, &access, 1);
      if (r != CUDA_SUCCESS) (void)drv_.mem_unmap(base_ + *offset, len);
    }
    if (r != CUDA_SUCCESS) (void)drv_.mem_release(h);
  }
  if (r != CUDA_SUCCESS) {
    last_error_ = r;
    va_.give(*offset, bytes);
    return nullptr;
  }
  handles_[*offset] = h;
  return reinterpret_cast<void*>(base_ + *offset);
}

void VmmSegmentSource::free_segment(void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t offset = reinterpret_cast<CUdeviceptr>(ptr) - base_;
  auto it = handles_.find(offset);
  if (it == handles_.end()) throw std::invalid_argument("VMM backend: freeing a segment it did not map");
  // Unmapping memory a queued kernel still uses would fault; frees are rare (release_cached).
  check_cu(drv_.ctx_synchronize(), "cuCtxSynchronize");
  check_cu(drv_.mem_unmap(base_ + offset, va_.round(bytes)), "cuMemUnmap");
  check_cu(drv_.mem_release(it->second), "cuMemRelease");
  handles_.erase(it);
  va_.give(offset, bytes);
}

}  // namespace vigil::cuda
