// The CPU backend's forward pass: model/llama_graph.h executed on the CPU kernels, for a batch of
// tokens from any number of sequences, over a host KV cache and thread pool it is given.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/batch_plan.h"
#include "backend/cpu/column_parallel_matmul.h"
#include "backend/cpu/kv_cache.h"
#include "backend/forward_backend.h"
#include "backend/op_profile.h"
#include "comm/tensor_parallel.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "model/llama_graph.h"
#include "model/llama_model.h"
#include "model/lora_adapter.h"
#include "model/rope.h"

namespace vigil {

class CpuForward {
 public:
  // Buffers are sized for max_batch tokens and max_positions per sequence, once, here.
  CpuForward(const LlamaModel& model, KvCache& cache, ThreadPool& pool, int max_batch, int max_positions);

  // Writes K/V of every token into the cache and computes logits for the tokens that want them,
  // in batch order. Throws std::invalid_argument for a batch that breaks the limits above.
  void forward(std::span<const BatchToken> batch);

  // Logits of the i-th token (in batch order) that asked for them; valid until the next forward.
  std::span<const float> logits(int i) const;
  int n_logits() const { return n_logits_; }

  // Splits every matrix product over the tensor-parallel group (column_parallel_matmul.h); the
  // leader also sends each batch's plan to the followers first. nullptr: one rank.
  void set_tensor_parallel(TensorParallel* tp) {
    tp_ = tp;
    if (tp) split_.emplace(*tp);
    else split_.reset();
  }
  bool tensor_parallel() const { return tp_ != nullptr; }
  // Times every op of the following passes into `profile` (op_profile.h); nullptr: stop.
  void set_profile(OpProfile* profile) { profile_ = profile; }

  const LlamaModel& model() const { return model_; }
  const KvCache& cache() const { return cache_; }
  int max_batch() const { return max_batch_; }
  int max_positions() const { return max_positions_; }

 private:
  // The ops llama_forward runs (model/llama_graph.h), on batch_.
  template <typename Ops>
  friend void llama_forward(const LlamaHparams& hp, Ops& ops);
  template <typename Inner>
  friend class ProfiledOps;
  float* act(Act a) { return acts_[static_cast<size_t>(a)].data(); }
  void embed(Act out);
  void rms_norm(int layer, SublayerNorm norm, Act in, Act out);
  // y = x·Wᵀ for the batch, plus the LoRA delta of every token whose adapter adapts this matrix.
  void project(int layer, LayerMatrix m, Act in, Act out);
  void rope(Act q, Act k);
  void store_kv(int layer, Act k, Act v);
  void attention(int layer, Act q, Act out);
  void add(Act acc, Act x);
  void swiglu(Act gate, Act up);
  void output_head(Act x);

  void check(std::span<const BatchToken> batch) const;
  void matmul(const WeightView& w, const float* x, int n, float* y);
  void group_by_adapter();
  void apply_lora(int layer, LayerMatrix m, const float* x, float* y);

  const LlamaModel& model_;
  const LlamaHparams& hp_;
  KvCache& cache_;
  ThreadPool& pool_;
  MatmulScratch scratch_;
  int max_batch_;
  int max_positions_;
  int n_logits_ = 0;
  std::span<const BatchToken> batch_;  // the pass being run
  TensorParallel* tp_ = nullptr;
  OpProfile* profile_ = nullptr;
  std::optional<ColumnParallelMatmul> split_;  // with tp_: every product split over the group
  BatchPlanEncoder plan_;  // the leader's plans for the followers

  std::array<std::vector<float>, kActs> acts_;  // by Act: [max_batch, act_width]
  std::vector<float> scores_;  // [threads, max_positions rounded up to 16] attention weights
  std::vector<float> lanes_;   // [threads, 4, 16, head_dim] lane partials of the weighted V sum
  RopeTable rope_;
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
