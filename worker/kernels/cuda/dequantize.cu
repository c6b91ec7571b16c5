// Device kernels that expand GGUF quantized rows (Q8_0, Q4_1) to f16 for cuBLAS GEMMs.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequantize.h"

namespace vigil::cuda {
namespace {

constexpr int kBlock = 32;
constexpr int kQ8_0Bytes = 34;  // f16 scale + 32 x int8
constexpr int kQ4_1Bytes = 20;  // f16 scale + f16 min + 16 bytes of nibbles

__device__ float load_half(const uint8_t* p) {
  __half_raw raw;
  raw.x = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__half(raw));
}

// One thread per element: 32 threads expand one block.
__global__ void dequantize_q8_0_kernel(const uint8_t* src, __half* dst, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const uint8_t* block = src + (i / kBlock) * kQ8_0Bytes;
  float d = load_half(block);
  dst[i] = __float2half(d * static_cast<float>(static_cast<int8_t>(block[2 + i % kBlock])));
}

// GGUF Q4_1 keeps element j in the low nibble of byte j and element j + 16 in the high nibble.
__global__ void dequantize_q4_1_kernel(const uint8_t* src, __half* dst, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const uint8_t* block = src + (i / kBlock) * kQ4_1Bytes;
  float d = load_half(block);
  float m = load_half(block + 2);
  int j = static_cast<int>(i % kBlock);
  uint8_t byte = block[4 + (j & 15)];
  int q = j < 16 ? (byte & 0x0F) : (byte >> 4);
  dst[i] = __float2half(d * static_cast<float>(q) + m);
}

unsigned grid_for(int64_t n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace

void dequantize_q8_0(const uint8_t* src, __half* dst, int64_t n_blocks, cudaStream_t stream) {
  int64_t n = n_blocks * kBlock;
  dequantize_q8_0_kernel<<<grid_for(n, 256), 256, 0, stream>>>(src, dst, n);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void dequantize_q4_1(const uint8_t* src, __half* dst, int64_t n_blocks, cudaStream_t stream) {
  int64_t n = n_blocks * kBlock;
  dequantize_q4_1_kernel<<<grid_for(n, 256), 256, 0, stream>>>(src, dst, n);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace vigil::cuda
