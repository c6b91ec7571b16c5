// Which forward backend `serve` runs, from the config's `backend:` section.
#pragma once

#include <string>
#include <vector>

namespace vigil {

enum class BackendKind { kCpu, kCuda };

struct CudaBackendConfig {
  int device = 0;
  bool graphs = true;               // false: every decode step eager (CUDA Graphs switched off)
  std::vector<int> graph_buckets;   // empty: powers of two up to engine.max_running
  bool vmm = false;                 // cuMemCreate/cuMemMap segments instead of cudaMalloc
  std::string matmul = "auto";      // auto | cublas | gemv
};

struct BackendConfig {
  BackendKind kind = BackendKind::kCpu;
  CudaBackendConfig cuda;
};

const char* backend_kind_name(BackendKind kind);

}  // namespace vigil
