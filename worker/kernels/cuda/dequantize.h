// Device kernels that expand GGUF quantized rows (Q8_0, Q4_1) to f16 for cuBLAS GEMMs.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace vigil::cuda {

// src: n_blocks consecutive GGUF blocks in device memory; dst: n_blocks * 32 halves.
void dequantize_q8_0(const uint8_t* src, __half* dst, int64_t n_blocks, cudaStream_t stream);
void dequantize_q4_1(const uint8_t* src, __half* dst, int64_t n_blocks, cudaStream_t stream);

}  // namespace vigil::cuda
