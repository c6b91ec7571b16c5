// Which forward backend `serve` runs, from the config's `backend:` section.
#pragma once

#include <vector>

namespace vigil {

enum class BackendKind { kCpu, kCuda };

enum class CudaMatmul { kAuto, kCublas, kGemv };

struct CudaBackendConfig {
  int device = 0;
  bool graphs = true;               // false: every decode step eager (CUDA Graphs switched off)
  std::vector<int> graph_buckets;   // empty: powers of two up to engine.max_running
  bool vmm = false;                 // cuMemCreate/cuMemMap segments instead of cudaMalloc
  CudaMatmul matmul = CudaMatmul::kAuto;  // auto: quantized GEMV up to 8 rows, cuBLAS above
};

struct BackendConfig {
  BackendKind kind = BackendKind::kCpu;
  CudaBackendConfig cuda;
};

const char* backend_kind_name(BackendKind kind);

}  // namespace vigil
