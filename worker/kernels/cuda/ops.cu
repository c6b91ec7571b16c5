// Device kernels of the llama forward pass other than matrix products (see ops.h).
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace vigil::cuda {
namespace {

constexpr int kQ8_0Bytes = 34;  // f16 scale + 32 x int8
constexpr int kQ4_1Bytes = 20;  // f16 scale + f16 min + 16 bytes of nibbles

__device__ float load_half(const uint8_t* p) {
  __half_raw raw;
  raw.x = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__half(raw));
}

// Element i of a row of `type`; the block formats are those of dequantize.cu.
__device__ float row_element(const uint8_t* row, DeviceType type, int i) {
  switch (type) {
    case DeviceType::kF32: return reinterpret_cast<const float*>(row)[i];
    case DeviceType::kF16: return load_half(row + 2 * i);
    case DeviceType::kQ8_0: {
      const uint8_t* b = row + (i / 32) * kQ8_0Bytes;
      return load_half(b) * static_cast<float>(static_cast<int8_t>(b[2 + i % 32]));
    }
    case DeviceType::kQ4_1: {
      const uint8_t* b = row + (i / 32) * kQ4_1Bytes;
      const int j = i % 32;
      const uint8_t byte = b[4 + (j & 15)];
      return load_half(b) * static_cast<float>(j < 16 ? (byte & 0x0F) : (byte >> 4)) + load_half(b + 2);
    }
  }
  return 0.0f;
}

__host__ __device__ int64_t row_bytes(DeviceType type, int n) {
  switch (type) {
    case DeviceType::kF32: return 4LL * n;
    case DeviceType::kF16: return 2LL * n;
    case DeviceType::kQ8_0: return static_cast<int64_t>(n / 32) * kQ8_0Bytes;
    case DeviceType::kQ4_1: return static_cast<int64_t>(n / 32) * kQ4_1Bytes;
  }
  return 0;
}

__global__ void embed_kernel(const uint8_t* table, DeviceType type, const int32_t* tokens, int n, float* x) {
  const uint8_t* row = table + tokens[blockIdx.x] * row_bytes(type, n);
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[static_cast<int64_t>(blockIdx.x) * n + i] = row_element(row, type, i);
}

__global__ void rms_norm_kernel(const float* x, const int32_t* src, const float* w, int n, float eps, float* out) {
  __shared__ double partial[32];
  const int r = blockIdx.x;
  const float* xr = x + static_cast<int64_t>(src ? src[r] : r) * n;
  double sum = 0.0;
  // Squares are rounded to float before the double sum, as the CPU does.
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<double>(xr[i] * xr[i]);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int wi = 0; wi < static_cast<int>(blockDim.x / 32); ++wi) total += partial[wi];
    partial[0] = total;
  }
  __syncthreads();
  const float mean = static_cast<float>(partial[0] / n);
  const float scale = 1.0f / sqrtf(mean + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[static_cast<int64_t>(r) * n + i] = xr[i] * scale * w[i];
}

// One block per row; thread t rotates pair t of the concatenated q and k heads.
__global__ void rope_kernel(float* q, float* k, const int32_t* pos, const float* cos_t, const float* sin_t,
                            int n_head, int n_head_kv, int hd) {
  const int r = blockIdx.x, half = hd / 2;
  const float* c = cos_t + static_cast<int64_t>(pos[r]) * half;
  const float* s = sin_t + static_cast<int64_t>(pos[r]) * half;
  const int q_pairs = n_head * half, pairs = (n_head + n_head_kv) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    float* v = p < q_pairs ? q + static_cast<int64_t>(r) * n_head * hd + 2 * p
                           : k + static_cast<int64_t>(r) * n_head_kv * hd + 2 * (p - q_pairs);
    const int i = (p < q_pairs ? p : p - q_pairs) % half;
    const float x0 = v[0], x1 = v[1];
    // The CPU's rounding (attention_ops rope_pairs, as llama.cpp's FMA build): explicit, so
    // nvcc's own contraction choices cannot move the result by an ulp.
    v[0] = __fmaf_rn(x0, c[i], -__fmul_rn(x1, s[i]));
    v[1] = __fmaf_rn(x0, s[i], __fmul_rn(x1, c[i]));
  }
}

__device__ __half* cache_row(__half* layer, int32_t slot, int kv, int kv_dim, int bs) {
  const int64_t block = slot / bs, in_block = slot % bs;
  return layer + ((block * 2 + kv) * bs + in_block) * kv_dim;
}

__global__ void kv_store_kernel(const float* k, const float* v, const int32_t* kv_slot, int kv_dim, int bs,
                                __half* layer) {
  const int r = blockIdx.x;
  __half* kc = cache_row(layer, kv_slot[r], 0, kv_dim, bs);
  __half* vc = cache_row(layer, kv_slot[r], 1, kv_dim, bs);
  for (int j = threadIdx.x; j < kv_dim; j += blockDim.x) {
    kc[j] = __float2half_rn(k[static_cast<int64_t>(r) * kv_dim + j]);
    vc[j] = __float2half_rn(v[static_cast<int64_t>(r) * kv_dim + j]);
  }
}

__device__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -FLT_MAX;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, scratch[w]);
    scratch[0] = m;
  }
  __syncthreads();
  const float m = scratch[0];
  __syncthreads();
  return m;
}

__device__ double block_sum(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += scratch[w];
    scratch[0] = s;
  }
  __syncthreads();
  const double s = scratch[0];
  __syncthreads();
  return s;
}

constexpr int kAttnThreads = 128;
constexpr int kMaxHeadDim = 256;

// One block per (row, head): scores in shared memory, a warp per position for Q·K, then every
// thread owns an output element of one of kAttnThreads / head_dim position strides.
__global__ void attention_kernel(const float* q, const __half* layer, const int32_t* pos, const int32_t* table,
                                 int max_blocks, int n_head, int n_head_kv, int hd, int bs, float* out) {
  extern __shared__ float scores[];
  __shared__ float q16[kMaxHeadDim];
  __shared__ float acc[kAttnThreads];
  __shared__ float fscratch[kAttnThreads / 32];
  __shared__ double dscratch[kAttnThreads / 32];
  const int r = blockIdx.x / n_head, h = blockIdx.x % n_head;
  const int kv_dim = n_head_kv * hd, kv_off = (h / (n_head / n_head_kv)) * hd;
  const int n_pos = pos[r] + 1;
  const int32_t* blocks = table + static_cast<int64_t>(r) * max_blocks;
  const float* qr = q + static_cast<int64_t>(r) * n_head * hd + static_cast<int64_t>(h) * hd;
  for (int e = threadIdx.x; e < hd; e += blockDim.x) q16[e] = __half2float(__float2half_rn(qr[e]));
  __syncthreads();
  const float scale = rsqrtf(static_cast<float>(hd));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int p = warp; p < n_pos; p += warps) {
    const __half* k = layer + ((static_cast<int64_t>(blocks[p / bs]) * 2) * bs + p % bs) * kv_dim + kv_off;
    float dot = 0.0f;
    for (int e = lane; e < hd; e += 32) dot += q16[e] * __half2float(k[e]);
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_down_sync(0xffffffffu, dot, o);
    if (lane == 0) scores[p] = dot * scale;
  }
  __syncthreads();
  float m = -FLT_MAX;
  for (int p = threadIdx.x; p < n_pos; p += blockDim.x) m = fmaxf(m, scores[p]);
  m = block_max(m, fscratch);
  double sum = 0.0;
  for (int p = threadIdx.x; p < n_pos; p += blockDim.x) {
    scores[p] = expf(scores[p] - m);
    sum += static_cast<double>(scores[p]);
  }
  const float inv = static_cast<float>(1.0 / block_sum(sum, dscratch));
  const int e = threadIdx.x % hd, part = threadIdx.x / hd, parts = blockDim.x / hd;
  float o = 0.0f;
  for (int p = part; p < n_pos; p += parts) {
    const float w = __half2float(__float2half_rn(scores[p] * inv));
    const __half* v = layer + ((static_cast<int64_t>(blocks[p / bs]) * 2 + 1) * bs + p % bs) * kv_dim + kv_off;
    o += w * __half2float(v[e]);
  }
  acc[threadIdx.x] = o;
  __syncthreads();
  if (part == 0) {
    for (int s = 1; s < parts; ++s) o += acc[s * hd + e];
    out[static_cast<int64_t>(r) * n_head * hd + static_cast<int64_t>(h) * hd + e] = o;
  }
}

__global__ void swiglu_kernel(float* gate, const float* up, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

__global__ void add_kernel(float* acc, const float* x, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) acc[i] += x[i];
}

__global__ void to_half_kernel(const float* x, __half* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(x[i]);
}

__global__ void argmax_kernel(const float* logits, int n, int32_t* out) {
  __shared__ float best_v[256];
  __shared__ int best_i[256];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n;
  float bv = -FLT_MAX;
  int bi = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (row[i] > bv) bv = row[i], bi = i;
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = best_v[threadIdx.x + s];
      const int oi = best_i[threadIdx.x + s];
      if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = best_i[0];
}

unsigned blocks_for(int64_t n, unsigned threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void embed_rows(const uint8_t* table, DeviceType type, const int32_t* tokens, int rows, int n, float* x,
                cudaStream_t stream) {
  embed_kernel<<<rows, 256, 0, stream>>>(table, type, tokens, n, x);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void rms_norm(const float* x, const int32_t* src, const float* weight, int rows, int n, float eps, float* out,
              cudaStream_t stream) {
  rms_norm_kernel<<<rows, 256, 0, stream>>>(x, src, weight, n, eps, out);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void rope(float* q, float* k, const int32_t* pos, const float* cos_table, const float* sin_table, int rows,
          int n_head, int n_head_kv, int head_dim, cudaStream_t stream) {
  rope_kernel<<<rows, 256, 0, stream>>>(q, k, pos, cos_table, sin_table, n_head, n_head_kv, head_dim);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void kv_store(const float* k, const float* v, const int32_t* kv_slot, int rows, int kv_dim, int block_size,
              __half* layer_cache, cudaStream_t stream) {
  kv_store_kernel<<<rows, 256, 0, stream>>>(k, v, kv_slot, kv_dim, block_size, layer_cache);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void prepare_attention(int max_positions) {
  VIGIL_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        max_positions * static_cast<int>(sizeof(float))));
}

void paged_attention(const float* q, const __half* layer_cache, const int32_t* pos, const int32_t* block_table,
                     int max_blocks, int rows, int n_head, int n_head_kv, int head_dim, int block_size,
                     int max_positions, float* out, cudaStream_t stream) {
  if (head_dim > kMaxHeadDim || kAttnThreads % head_dim != 0 || n_head % n_head_kv != 0)
    throw_error("paged_attention", __FILE__, __LINE__, "unsupported head_dim or head grouping");
  attention_kernel<<<rows * n_head, kAttnThreads, static_cast<size_t>(max_positions) * sizeof(float), stream>>>(
      q, layer_cache, pos, block_table, max_blocks, n_head, n_head_kv, head_dim, block_size, out);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void swiglu(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  swiglu_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(gate, up, n);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void add_into(float* acc, const float* x, int64_t n, cudaStream_t stream) {
  add_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(acc, x, n);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void to_half(const float* x, __half* y, int64_t n, cudaStream_t stream) {
  to_half_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, y, n);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

void argmax_rows(const float* logits, int rows, int n, int32_t* out, cudaStream_t stream) {
  argmax_kernel<<<rows, 256, 0, stream>>>(logits, n, out);
  VIGIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace vigil::cuda
