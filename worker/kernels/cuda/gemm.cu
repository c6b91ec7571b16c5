// Matrix products of the CUDA backend (see gemm.h).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequantize.h"
#include "kernels/cuda/gemm.h"

namespace vigil::cuda {
namespace {

__device__ float half_at(const uint8_t* p) {
  __half_raw raw;
  raw.x = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__half(raw));
}

// Dot products of 32 weights of block `b` with the matching 32 inputs of up to kMaxGemvRows rows.
template <DeviceType T>
__device__ void block_dot(const uint8_t* row, int b, const float* x, int cols, int n, float* acc) {
  float w[32];
  if constexpr (T == DeviceType::kQ4_1) {
    const uint8_t* blk = row + b * 20;
    const float d = half_at(blk), m = half_at(blk + 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      w[j] = d * static_cast<float>(blk[4 + j] & 0x0F) + m;
      w[j + 16] = d * static_cast<float>(blk[4 + j] >> 4) + m;
    }
  } else if constexpr (T == DeviceType::kQ8_0) {
    const uint8_t* blk = row + b * 34;
    const float d = half_at(blk);
#pragma unroll
    for (int j = 0; j < 32; ++j) w[j] = d * static_cast<float>(static_cast<int8_t>(blk[2 + j]));
  } else if constexpr (T == DeviceType::kF16) {
#pragma unroll
    for (int j = 0; j < 32; ++j) w[j] = half_at(row + 2 * (b * 32 + j));
  } else {
#pragma unroll
    for (int j = 0; j < 32; ++j) w[j] = reinterpret_cast<const float*>(row)[b * 32 + j];
  }
  for (int t = 0; t < n; ++t) {
    const float* xt = x + static_cast<int64_t>(t) * cols + b * 32;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; ++j) s += w[j] * xt[j];
    acc[t] += s;
  }
}

template <DeviceType T>
__global__ void gemv_kernel(const uint8_t* quant, int64_t row_bytes, int rows, int cols, const float* x, int n,
                            float* y) {
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float acc[kMaxGemvRows] = {};
  const uint8_t* row = quant + r * row_bytes;
  for (int b = lane; b < cols / 32; b += 32) block_dot<T>(row, b, x, cols, n, acc);
  for (int t = 0; t < n; ++t) {
    float s = acc[t];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) y[static_cast<int64_t>(t) * rows + r] = s;
  }
}

__global__ void f32_to_f16_kernel(const float* x, __half* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(x[i]);
}

int64_t bytes_per_row(const DeviceWeight& w) {
  switch (w.type) {
    case DeviceType::kF32: return 4LL * w.cols;
    case DeviceType::kF16: return 2LL * w.cols;
    case DeviceType::kQ8_0: return static_cast<int64_t>(w.cols / 32) * 34;
    case DeviceType::kQ4_1: return static_cast<int64_t>(w.cols / 32) * 20;
  }
  return 0;
}

}  // namespace

void gemm_cublas(cublasHandle_t handle, const DeviceWeight& w, const __half* x16, int n, float* y) {
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major W [rows, cols] is column-major Wᵀ; the column-major result [rows, n] is row-major y.
  VIGIL_CUDA_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, w.rows, n, w.cols, &alpha, w.f16, CUDA_R_16F,
                                w.cols, x16, CUDA_R_16F, w.cols, &beta, y, CUDA_R_32F, w.rows, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

void gemv_quant(const DeviceWeight& w, const float* x, int n, float* y, cudaStream_t stream) {
  if (n < 1 || n > kMaxGemvRows || w.cols % 32 != 0)
    throw_error("gemv_quant", __FILE__, __LINE__, "batch or row width outside the GEMV's range");
  constexpr int kWarps = 4;
  const unsigned grid = static_cast<unsigned>((w.rows + kWarps - 1) / kWarps);
  const int64_t rb = bytes_per_row(w);
  switch (w.type) {
    case DeviceType::kQ4_1: gemv_kernel<DeviceType::kQ4_1><<<grid, kWarps * 32, 0, stream>>>(w.quant, rb, w.rows, w.cols, x, n, y); break;
    case DeviceType::kQ8_0: gemv_kernel<DeviceType::kQ8_0><<<grid, kWarps * 32, 0, stream>>>(w.quant, rb, w.rows, w.cols, x, n, y); break;
    case DeviceType::kF16: gemv_kernel<DeviceType::kF16><<<grid, kWarps * 32, 0, stream>>>(w.quant, rb, w.rows, w.cols, x, n, y); break;
    case DeviceType::kF32: gemv_kernel<DeviceType::kF32><<<grid, kWarps * 32, 0, stream>>>(w.quant, rb, w.rows, w.cols, x, n, y); break;
  }
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void dequantize_weight(const DeviceWeight& w, __half* f16, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(w.rows) * w.cols;
  switch (w.type) {
    case DeviceType::kQ8_0: dequantize_q8_0(w.quant, f16, n / 32, stream); break;
    case DeviceType::kQ4_1: dequantize_q4_1(w.quant, f16, n / 32, stream); break;
    case DeviceType::kF16: VIGIL_CUDA_CHECK(cudaMemcpyAsync(f16, w.quant, static_cast<size_t>(n) * 2, cudaMemcpyDeviceToDevice, stream)); break;
    case DeviceType::kF32:
      f32_to_f16_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(reinterpret_cast<const float*>(w.quant), f16, n);
      VIGIL_CUDA_CHECK(cudaGetLastError());
      break;
  }
}

}  // namespace vigil::cuda
