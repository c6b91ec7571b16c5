#include "backend/select/backend_select.h"

#include <stdexcept>

#include "backend/cpu/cpu_backend.h"

#ifdef VIGIL_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace vigil {

const char* backend_kind_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kCuda: return "cuda";
  }
  return "unknown";
}

bool parse_backend_kind(std::string_view name, BackendKind& kind) {
  if (name == "cpu") kind = BackendKind::kCpu;
  else if (name == "cuda") kind = BackendKind::kCuda;
  else return false;
  return true;
}

bool cuda_backend_built() {
#ifdef VIGIL_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<ForwardBackend> make_backend(const BackendConfig& config, const LlamaModel& model,
                                             const BackendShape& shape, TensorParallel* tp) {
  if (config.kind == BackendKind::kCpu) return std::make_unique<CpuBackend>(model, shape, tp);
  if (tp) throw std::invalid_argument("tensor parallelism runs on the CPU backend only");
#ifdef VIGIL_HAVE_CUDA
  const CudaBackendConfig& cuda = config.cuda;
  vigil::cuda::CudaOptions o;
  o.device = cuda.device;
  o.max_batch = shape.max_batch;
  o.max_positions = shape.max_positions;
  o.n_blocks = shape.kv_blocks;
  o.block_size = shape.kv_block_size;
  o.graphs = cuda.graphs;
  o.graph_buckets = cuda.graph_buckets;
  if (o.graph_buckets.empty()) {  // decode steps never exceed one token per running sequence
    const GraphBuckets buckets = GraphBuckets::powers_of_two(shape.decode_rows);
    o.graph_buckets.assign(buckets.sizes().begin(), buckets.sizes().end());
  }
  o.vmm = cuda.vmm;
  using Matmul = vigil::cuda::CudaOptions::Matmul;
  o.matmul = cuda.matmul == CudaMatmul::kCublas ? Matmul::kCublas
             : cuda.matmul == CudaMatmul::kGemv ? Matmul::kGemv
                                                : Matmul::kAuto;
  return std::make_unique<vigil::cuda::CudaBackend>(model, o);
#else
  throw std::runtime_error(
      "this vigil-worker was built without the CUDA backend (no nvcc at build time; rebuild with "
      "-DVIGIL_CUDA=ON)");
#endif
}

}  // namespace vigil
