// Device kernels of the llama forward pass other than matrix products: embedding gather, RMSNorm,
// RoPE, KV cache store, paged attention, SwiGLU, residual add, f16 conversion, argmax.
// Numerics mirror backend/cpu/cpu_forward.cpp (the CPU backend) wherever that is cheap on a GPU.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace vigil::cuda {

// GGUF types a weight or embedding table may have on the device (values of GgmlType).
enum class DeviceType : uint32_t { kF32 = 0, kF16 = 1, kQ4_1 = 3, kQ8_0 = 8 };

// x[r] = row tokens[r] of `table` ([n_vocab, n] of `type`), expanded to f32.
void embed_rows(const uint8_t* table, DeviceType type, const int32_t* tokens, int rows, int n, float* x,
                cudaStream_t stream);
// out[r] = x[src ? src[r] : r] / rms * weight; sum of squares in double, as the CPU.
void rms_norm(const float* x, const int32_t* src, const float* weight, int rows, int n, float eps, float* out,
              cudaStream_t stream);
// Rotates adjacent pairs of every head of q [rows, n_head*hd] and k [rows, n_head_kv*hd] by the
// angle table [max_positions, hd/2] (built on the host exactly as the CPU builds it).
void rope(float* q, float* k, const int32_t* pos, const float* cos_table, const float* sin_table, int rows,
          int n_head, int n_head_kv, int head_dim, cudaStream_t stream);
// Stores k and v rows [rows, kv_dim] as f16 at cache slot kv_slot[r] of one layer's storage,
// laid out [block][k|v][slot][kv_dim] like the host KvCache.
void kv_store(const float* k, const float* v, const int32_t* kv_slot, int rows, int kv_dim, int block_size,
              __half* layer_cache, cudaStream_t stream);
// Grouped-query attention of each row over positions [0, pos[r]] of its block table
// ([rows, max_blocks] block ids). q rounded to f16 before Q·K, softmax sum in double, weights
// rounded to f16 before weighting V, as the CPU. Needs max_positions floats of shared memory.
void paged_attention(const float* q, const __half* layer_cache, const int32_t* pos, const int32_t* block_table,
                     int max_blocks, int rows, int n_head, int n_head_kv, int head_dim, int block_size,
                     int max_positions, float* out, cudaStream_t stream);
// Raises the shared-memory limit of the attention kernel for max_positions; call once at start.
void prepare_attention(int max_positions);
// gate = silu(gate) * up
void swiglu(float* gate, const float* up, int64_t n, cudaStream_t stream);
// acc += x
void add_into(float* acc, const float* x, int64_t n, cudaStream_t stream);
void to_half(const float* x, __half* y, int64_t n, cudaStream_t stream);
// out[r] = index of the largest of logits[r, 0..n) (lowest index on ties, like the CPU sampler).
void argmax_rows(const float* logits, int rows, int n, int32_t* out, cudaStream_t stream);

}  // namespace vigil::cuda
