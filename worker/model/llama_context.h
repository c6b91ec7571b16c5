// Runs the llama forward pass for a batch of tokens from any number of sequences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"

namespace vigil {

// One token of a batch: its id, its position in its sequence, and that sequence's block table
// (which must already hold position `pos`).
struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;
  const KvSequence* seq = nullptr;
  bool want_logits = false;
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

  const LlamaModel& model() const { return model_; }
  const KvCache& cache() const { return cache_; }
  int max_batch() const { return max_batch_; }
  int max_positions() const { return max_positions_; }

 private:
  void attention(int layer, std::span<const BatchToken> batch);

  const LlamaModel& model_;
  const LlamaHparams& hp_;
  KvCache& cache_;
  ThreadPool& pool_;
  MatmulScratch scratch_;
  int max_batch_;
  int max_positions_;
  int n_logits_ = 0;

  std::vector<float> x_;       // [max_batch, n_embd] residual stream
  std::vector<float> xb_;      // [max_batch, n_embd] normalized input of a sublayer
  std::vector<float> q_;       // [max_batch, n_embd]
  std::vector<float> k_;       // [max_batch, kv_dim]
  std::vector<float> v_;       // [max_batch, kv_dim]
  std::vector<float> att_;     // [max_batch, n_embd] attention output before Wo
  std::vector<float> proj_;    // [max_batch, n_embd] output of Wo or ffn_down
  std::vector<float> gate_;    // [max_batch, n_ff]
  std::vector<float> up_;      // [max_batch, n_ff]
  std::vector<float> scores_;  // [threads, max_positions] attention weights
  std::vector<float> rope_cos_, rope_sin_;  // [max_positions, head_dim / 2]
  std::vector<float> out_in_;  // [max_batch, n_embd] final-normed rows that want logits
  std::vector<float> logits_;  // [max_batch, n_vocab]
};

}  // namespace vigil
