#include "engine/cpu_backend.h"

#include "kernels/cpu/matmul.h"

namespace vigil {

CpuBackend::CpuBackend(const LlamaModel& model, const BackendShape& shape)
    : alloc_(std::make_unique<HostMemoryBackend>()),
      cache_(model.hparams(), shape.kv_blocks, shape.kv_block_size, alloc_),
      pool_(shape.threads),
      ctx_(model, cache_, pool_, shape.max_batch, shape.max_positions) {}

std::string CpuBackend::describe() const {
  return "cpu " + std::string(cpu_kernel_path()) + ", " + std::to_string(pool_.size()) + " threads";
}

}  // namespace vigil
