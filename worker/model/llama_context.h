// Runs the llama forward pass for a batch of tokens from any number of sequences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "model/kv_cache.h"
#include "model/lora_adapter.h"
#include "model/llama_model.h"

namespace vigil {

class TensorParallel;

// One token of a batch: its id, its position in its sequence, that sequence's block table
// (which must already hold position `pos`), and the LoRA adapter its request uses.
struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;
  const KvSequence* seq = nullptr;
  bool want_logits = false;
  const LoraAdapter* adapter = nullptr;  // nullptr: the base model; must outlive forward()
  // A generated token rather than a prompt token. llama.cpp decodes those one at a time through
  // its vector dot, prompts through its batched matmul; attention sums in the matching order, so
  // results follow the token's role, never the batch it happens to share.
  bool generated = false;
};

class LlamaContext {
 public:
  // Buffers are sized for max_batch tokens and max_positions per sequence, once, here.
  LlamaContext(const LlamaModel& model, KvCache& cache, ThreadPool& pool, int max_batch,
               int max_positions);

  // Writes K/V of every token into the cache and computes logits for the tokens that want them,
  // in batch order. Throws std::invalid_argument for a batch that breaks the limits above.
  void forward(std::span<const BatchToken> batch);

  // Logits of the i-th token (in batch order) that asked for them; valid until the next forward.
  std::span<const float> logits(int i) const;
  int n_logits() const { return n_logits_; }

  // Splits every matrix product over the tensor-parallel group (comm/tensor_parallel.h); the
  // leader also sends each batch to the followers. nullptr: one rank.
  void set_tensor_parallel(TensorParallel* tp) { tp_ = tp; }

  const LlamaModel& model() const { return model_; }
  const KvCache& cache() const { return cache_; }
  int max_batch() const { return max_batch_; }
  int max_positions() const { return max_positions_; }

 private:
  void attention(int layer, std::span<const BatchToken> batch);
  // y = x·Wᵀ for the batch, plus the LoRA delta of every token whose adapter adapts this matrix.
  void project(int layer, LoraTarget target, const WeightView& w, const float* x, int n, float* y);
  void group_by_adapter(std::span<const BatchToken> batch);
  void apply_lora(int layer, LoraTarget target, const float* x, float* y);

  const LlamaModel& model_;
  const LlamaHparams& hp_;
  KvCache& cache_;
  ThreadPool& pool_;
  MatmulScratch scratch_;
  int max_batch_;
  int max_positions_;
  int n_logits_ = 0;
  TensorParallel* tp_ = nullptr;

  std::vector<float> x_;       // [max_batch, n_embd] residual stream
  std::vector<float> xb_;      // [max_batch, n_embd] normalized input of a sublayer
  std::vector<float> q_;       // [max_batch, n_embd]
  std::vector<float> k_;       // [max_batch, kv_dim]
  std::vector<float> v_;       // [max_batch, kv_dim]
  std::vector<float> att_;     // [max_batch, n_embd] attention output before Wo
  std::vector<float> proj_;    // [max_batch, n_embd] output of Wo or ffn_down
  std::vector<float> gate_;    // [max_batch, n_ff]
  std::vector<float> up_;      // [max_batch, n_ff]
  std::vector<float> scores_;  // [threads, max_positions rounded up to 16] attention weights
  std::vector<float> lanes_;   // [threads, 4, 16, head_dim] lane partials of the weighted V sum
  std::vector<float> rope_cos_, rope_sin_;  // [max_positions, head_dim / 2]
  std::vector<float> out_in_;  // [max_batch, n_embd] final-normed rows that want logits
  std::vector<float> logits_;  // [max_batch, n_vocab]

  // LoRA: the batch's adapted tokens grouped by adapter, so each adapter's A and B are read once
  // per step however many of its requests share the batch.
  struct LoraGroup {
    const LoraAdapter* adapter;
    int begin, count;  // its tokens are lora_rows_[begin, begin + count)
  };
  std::vector<LoraGroup> lora_groups_;  // capacity max_batch, empty when no token is adapted
  std::vector<int> lora_rows_;          // [max_batch] batch indices, group after group
  std::vector<float> lora_x_;           // [max_batch, max(n_embd, n_ff)] a group's gathered inputs
  std::vector<float> lora_t_;           // [max_batch, kMaxLoraRank] A x
  std::vector<float> lora_y_;           // [max_batch, max(n_embd, n_ff)] B (A x)
  ThreadPool lora_inline_{1};           // runs small LoRA products on the calling thread
};

}  // namespace vigil
