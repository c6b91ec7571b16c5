// Matrix products y = x·Wᵀ of the CUDA backend over GGUF weights: an f16 copy of W (dequantized
// once at load) through cuBLAS, and a quantized-weight GEMV for small decode batches.
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace vigil::cuda {

// One weight matrix on the device: `rows` outputs of `cols` inputs each.
struct DeviceWeight {
  DeviceType type = DeviceType::kF32;
  int rows = 0;
  int cols = 0;
  const uint8_t* quant = nullptr;  // GGUF rows as in the file (what the GEMV reads)
  const __half* f16 = nullptr;     // [rows, cols] dequantized (what cuBLAS reads)
};

// The largest batch the quantized GEMV takes; bigger batches go to cuBLAS.
constexpr int kMaxGemvRows = 8;

// y [n, rows] f32 = x16 [n, cols] f16 · Wᵀ, accumulated in f32. cuBLAS must already have its
// stream and a workspace (cublasSetWorkspace) so it never allocates, e.g. inside a graph capture.
void gemm_cublas(cublasHandle_t handle, const DeviceWeight& w, const __half* x16, int n, float* y);
// The same product straight from the quantized rows (Q4_1, Q8_0, F16, F32), x in f32, one warp
// per output row; n <= kMaxGemvRows.
void gemv_quant(const DeviceWeight& w, const float* x, int n, float* y, cudaStream_t stream);
// Expands `w.quant` into `f16` ([rows, cols]).
void dequantize_weight(const DeviceWeight& w, __half* f16, cudaStream_t stream);

}  // namespace vigil::cuda
