#include "backend/cpu/cpu_backend.h"

#include "kernels/cpu/cpu_info.h"
#include "kernels/cpu/matmul.h"

namespace vigil {

CpuBackend::CpuBackend(const LlamaModel& model, const BackendShape& shape, TensorParallel* tp)
    : alloc_(std::make_shared<CachingAllocator>(std::make_unique<HostSegmentSource>())),
      cache_(model.hparams(), shape.kv_blocks, shape.kv_block_size, *alloc_),
      pool_(shape.threads),
      forward_(model, cache_, pool_, shape.max_batch, shape.max_positions) {
  forward_.set_tensor_parallel(tp);
}

AdapterMemory CpuBackend::adapter_memory() const {
  return [alloc = alloc_](size_t bytes) {
    return std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(alloc->allocate(bytes)),
                                      [alloc](uint8_t* p) { alloc->free(p); });
  };
}

std::string CpuBackend::describe() const {
  std::string d = "cpu " + std::string(cpu_kernel_path()) + " on " + cpu_model_name() + ", " +
                  std::to_string(pool_.size()) + " threads";
  return forward_.tensor_parallel() ? d + ", tensor parallel" : d;
}

BackendDevice CpuBackend::device() const { return {"cpu", std::string(cpu_kernel_path()), cpu_model_name()}; }

}  // namespace vigil
