// The CUDA backend: model/llama_graph.h executed on one GPU with the kernels of kernels/cuda/.
// Weights uploaded once, paged f16 KV cache and activations from a device CachingAllocator,
// decode steps replayed from CUDA Graphs per batch-size bucket.
#pragma once

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/caching_allocator.h"
#include "backend/cuda/device_batch.h"
#include "backend/cuda/graph_cache.h"
#include "backend/forward_backend.h"
#include "kernels/cuda/gemm.h"
#include "model/llama_graph.h"

namespace vigil::cuda {

struct CudaOptions {
  int device = 0;
  int max_batch = 16;        // rows per forward call
  int max_positions = 2048;  // per sequence
  int n_blocks = 0;          // KV blocks, numbered as the host KvBlockAllocator numbers them
  int block_size = 16;
  bool graphs = true;             // false: every step eager (the config switch)
  std::vector<int> graph_buckets;  // empty: powers of two up to max_batch
  enum class Matmul { kAuto, kCublas, kGemv } matmul = Matmul::kAuto;  // kAuto: GEMV for <= 8 rows
  bool vmm = false;                 // cuMemCreate/cuMemMap segments instead of cudaMalloc
  size_t vmm_reserve_bytes = 64ull << 30;
};

class CudaBackend final : public ForwardBackend, private GraphRunner {
 public:
  // Throws std::runtime_error (with the failing call) when there is no usable device.
  CudaBackend(const LlamaModel& model, const CudaOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // As ForwardBackend::forward. A step where every token wants logits (decode) goes through the
  // graph cache; others (prefill) run eagerly. Logits are copied to the host when copy_logits.
  void forward(std::span<const BatchToken> batch, bool copy_logits);
  int32_t argmax(int i) const;  // greedy token of the i-th token that wanted logits, from the device
  int n_logits() const { return staged_.n_logits; }

  // ForwardBackend
  void forward(std::span<const BatchToken> batch) override { forward(batch, true); }
  std::span<const float> logits(int i) const override;
  bool supports_lora() const override { return false; }
  std::string describe() const override;  // device, memory backend, matmul path, graph buckets
  BackendDevice device() const override;  // kernel_path: the matmul path
  AllocatorStats allocator_stats() const override { return alloc_->stats(); }
  std::optional<GraphStats> graph_stats() const override { return graphs_.stats(); }

 private:
  struct LayerWeights {
    const float* attn_norm;
    const float* ffn_norm;
    std::array<DeviceWeight, kLayerMatrices> matrix;  // by LayerMatrix
  };
  void init();              // everything the constructor allocates, in order
  void release() noexcept;  // frees what init got to
  DeviceWeight upload_weight(const WeightView& w, const char* what);
  const float* upload_f32(const float* host, size_t n);
  template <typename T>
  T* device_array(size_t n);
  void matmul(const DeviceWeight& w, const float* x, int n, float* y);
  const char* matmul_path() const;
  void enqueue(int rows, int n_out);  // the forward pass as kernel launches on stream_

  // The ops llama_forward runs (model/llama_graph.h): kernel launches for rows_ rows.
  template <typename Ops>
  friend void ::vigil::llama_forward(const LlamaHparams& hp, Ops& ops);
  float* act(Act a) const { return acts_[static_cast<size_t>(a)]; }
  void embed(Act out);
  void rms_norm(int layer, SublayerNorm norm, Act in, Act out);
  void project(int layer, LayerMatrix m, Act in, Act out);
  void rope(Act q, Act k);
  void store_kv(int layer, Act k, Act v);
  void attention(int layer, Act q, Act out);
  void add(Act acc, Act x);
  void swiglu(Act gate, Act up);
  void output_head(Act x);
  // The staged index arrays on the device (layout in stage_inputs).
  const int32_t* staged(int array) const { return index_ + static_cast<size_t>(array) * static_cast<size_t>(opt_.max_batch); }

  // GraphRunner
  void stage_inputs(int rows) override;
  Captured capture(int rows) override;
  int launch(int handle) override;
  void run_eager(int rows) override;

  const LlamaModel& model_;
  const LlamaHparams& hp_;
  CudaOptions opt_;
  DeviceKvGeometry geo_;
  std::unique_ptr<CachingAllocator> alloc_;
  std::vector<void*> owned_;  // every device buffer, from alloc_, freed in the destructor
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

  std::vector<LayerWeights> layers_;
  DeviceWeight output_;
  const uint8_t* embd_ = nullptr;  // token_embd rows as in the file
  DeviceType embd_type_ = DeviceType::kF32;
  const float* output_norm_ = nullptr;
  const float* rope_cos_ = nullptr;  // [max_positions, head_dim / 2]
  const float* rope_sin_ = nullptr;
  std::vector<__half*> kv_;  // [layer] -> [n_blocks + 1][k|v][block_size][kv_dim]; last: pad block

  std::array<float*, kActs> acts_{};  // by Act: [max_batch, act_width]
  float *out_in_, *logits_;            // [max_batch, n_embd], [max_batch, n_vocab]
  __half* x16_;      // [max_batch, max(n_embd, n_ff)] f16 inputs of cuBLAS products
  int32_t* argmax_;  // [max_batch]
  int32_t* index_;   // device copy of the staged arrays: tokens, pos, kv_slot, logit_rows, table
  int32_t* host_index_ = nullptr;  // pinned, same layout
  float* host_logits_ = nullptr;   // pinned [max_batch, n_vocab]
  int32_t* host_argmax_ = nullptr; // pinned [max_batch]
  size_t index_len_ = 0;
  int rows_ = 0, n_out_ = 0;  // of the pass being enqueued

  std::span<const BatchToken> batch_;  // the step being run (GraphRunner callbacks read it)
  DeviceBatch staged_;
  DecodeGraphCache graphs_;
  std::vector<CUgraphExec> execs_;
};

}  // namespace vigil::cuda
