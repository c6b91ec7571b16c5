// Which forward backend a verb runs: serve's `backend:` section, generate's and bench's --backend.
#pragma once

#include <string_view>
#include <vector>

#include "model/mapped_file.h"

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
  // Where the CPU backend reads the weights from on every decode step: huge pages stream faster
  // than the file's 4 KiB page-cache mapping; page_cache shares one copy between the workers of a
  // node (docs/decisions.md, "Weights in huge pages").
  WeightsPlacement weights = WeightsPlacement::kHugePages;
};

// How the model is loaded for this backend: a GPU backend reads the file once, to upload it, so
// a private copy would only cost memory and start time.
inline WeightsPlacement weights_placement(const BackendConfig& b) {
  return b.kind == BackendKind::kCpu ? b.weights : WeightsPlacement::kPageCache;
}

const char* backend_kind_name(BackendKind kind);
// "cpu" or "cuda" to its kind; false for any other name.
bool parse_backend_kind(std::string_view name, BackendKind& kind);

}  // namespace vigil
