// Runs the llama forward pass for a batch of tokens from any number of sequences.
//
// Numerics follow llama.cpp's CPU path so greedy outputs match it token for token: RMSNorm sums
// in double, RoPE angles by repeated float multiplication and rotations with llama.cpp's fused
// multiply-adds, K/V cached as f16, queries rounded to f16 before Q·K, softmax sums in double,
// attention weights rounded to f16 before weighting V.
#include "model/llama_context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "comm/tensor_parallel.h"
#include "kernels/cpu/attention_ops.h"
#include "kernels/cpu/fp16.h"

namespace vigil {
namespace {

// out = x / rms(x) * weight, row by row.
void rms_norm(const float* x, const float* weight, int n_rows, int n, float eps, float* out) {
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * n;
    float* yr = out + static_cast<size_t>(r) * n;
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(xr[i] * xr[i]);
    const float mean = static_cast<float>(sum / n);
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int i = 0; i < n; ++i) yr[i] = xr[i] * scale * weight[i];
  }
}

void add_into(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

// gate = silu(gate) * up, row by row (ggml's vector chunks start at each row).
void swiglu(float* gate, const float* up, int n_rows, int n) {
  for (int r = 0; r < n_rows; ++r)
    swiglu_row(gate + static_cast<size_t>(r) * n, up + static_cast<size_t>(r) * n, n);
}

}  // namespace

LlamaContext::LlamaContext(const LlamaModel& model, KvCache& cache, ThreadPool& pool, int max_batch,
                           int max_positions)
    : model_(model),
      hp_(model.hparams()),
      cache_(cache),
      pool_(pool),
      max_batch_(max_batch),
      max_positions_(max_positions) {
  if (max_batch <= 0 || max_positions <= 0)
    throw std::invalid_argument("context needs max_batch and max_positions > 0");
  const size_t b = static_cast<size_t>(max_batch);
  x_.resize(b * hp_.n_embd);
  xb_.resize(b * hp_.n_embd);
  q_.resize(b * hp_.n_embd);
  k_.resize(b * hp_.kv_dim());
  v_.resize(b * hp_.kv_dim());
  att_.resize(b * hp_.n_embd);
  proj_.resize(b * hp_.n_embd);
  gate_.resize(b * hp_.n_ff);
  up_.resize(b * hp_.n_ff);
  out_in_.resize(b * hp_.n_embd);
  logits_.resize(b * hp_.n_vocab);
  scores_.resize(static_cast<size_t>(pool.size()) * static_cast<size_t>((max_positions + 15) / 16 * 16));
  lanes_.resize(static_cast<size_t>(pool.size()) * 64 * static_cast<size_t>(hp_.head_dim));
  const size_t widest = static_cast<size_t>(std::max({hp_.n_embd, hp_.n_ff, hp_.kv_dim()}));
  lora_groups_.reserve(b);
  lora_rows_.resize(b);
  lora_x_.resize(b * widest);
  lora_t_.resize(b * kMaxLoraRank);
  lora_y_.resize(b * widest);

  // The angle table, computed the way ggml's rope cache does (theta *= theta_scale per pair).
  const int half = hp_.head_dim / 2;
  rope_cos_.resize(static_cast<size_t>(max_positions) * half);
  rope_sin_.resize(rope_cos_.size());
  const float theta_scale = std::pow(hp_.rope_theta, -2.0f / static_cast<float>(hp_.head_dim));
  for (int p = 0; p < max_positions; ++p) {
    float theta = static_cast<float>(p);
    for (int i = 0; i < half; ++i) {
      rope_cos_[static_cast<size_t>(p) * half + i] = std::cos(theta);
      rope_sin_[static_cast<size_t>(p) * half + i] = std::sin(theta);
      theta *= theta_scale;
    }
  }
}

void LlamaContext::forward(std::span<const BatchToken> batch) {
  const int n = static_cast<int>(batch.size());
  if (n == 0) return;
  if (n > max_batch_)
    throw std::invalid_argument("batch of " + std::to_string(n) + " tokens exceeds max_batch " +
                                std::to_string(max_batch_));
  for (const BatchToken& t : batch) {
    if (t.token < 0 || t.token >= hp_.n_vocab)
      throw std::invalid_argument("token id " + std::to_string(t.token) + " outside the vocabulary");
    if (t.pos < 0 || t.pos >= max_positions_)
      throw std::invalid_argument("position " + std::to_string(t.pos) + " outside the context of " +
                                  std::to_string(max_positions_));
    if (!t.seq || static_cast<size_t>(t.pos / cache_.block_size()) >= t.seq->blocks.size())
      throw std::invalid_argument("position " + std::to_string(t.pos) +
                                  " has no KV cache block reserved");
    if (tp_ && t.adapter)
      throw std::invalid_argument("LoRA adapters are not supported with tensor parallelism");
  }
  // Held for the whole pass: the leader's heartbeat must not interleave with its collectives.
  std::unique_lock<std::mutex> tp_lock;
  if (tp_) tp_lock = tp_->begin_forward(batch);
  const int d = hp_.n_embd, kv = hp_.kv_dim(), ff = hp_.n_ff;
  const size_t ud = static_cast<size_t>(d);
  group_by_adapter(batch);

  // Token embeddings.
  for (int i = 0; i < n; ++i) {
    const WeightView& e = model_.token_embd();
    const size_t row_bytes =
        ggml_row_bytes(*ggml_type_traits(static_cast<uint32_t>(e.type)), static_cast<uint64_t>(e.cols));
    dequantize_row(e.type, e.data + static_cast<size_t>(batch[i].token) * row_bytes, d, &x_[i * ud]);
  }

  for (int l = 0; l < hp_.n_layer; ++l) {
    const LlamaLayer& layer = model_.layers()[l];

    // Attention block: norm, Q/K/V projections, RoPE, cache write, attention, output projection.
    rms_norm(x_.data(), layer.attn_norm, n, d, hp_.rms_eps, xb_.data());
    project(l, LoraTarget::kQ, layer.wq, xb_.data(), n, q_.data());
    project(l, LoraTarget::kK, layer.wk, xb_.data(), n, k_.data());
    project(l, LoraTarget::kV, layer.wv, xb_.data(), n, v_.data());
    const int half = hp_.head_dim / 2;
    for (int i = 0; i < n; ++i) {
      const float* c = &rope_cos_[static_cast<size_t>(batch[i].pos) * half];
      const float* s = &rope_sin_[static_cast<size_t>(batch[i].pos) * half];
      // Adjacent pairs rotate (the GGUF q/k weights are permuted for this layout).
      for (int h = 0; h < hp_.n_head; ++h) rope_pairs(&q_[i * ud + h * hp_.head_dim], hp_.head_dim, c, s);
      for (int h = 0; h < hp_.n_head_kv; ++h)
        rope_pairs(&k_[static_cast<size_t>(i) * kv + h * hp_.head_dim], hp_.head_dim, c, s);
      const int32_t block = batch[i].seq->blocks[batch[i].pos / cache_.block_size()];
      const int slot = batch[i].pos % cache_.block_size();
      uint16_t* kc = cache_.k(l, block, slot);
      uint16_t* vc = cache_.v(l, block, slot);
      for (int j = 0; j < kv; ++j) {
        kc[j] = fp32_to_fp16(k_[static_cast<size_t>(i) * kv + j]);
        vc[j] = fp32_to_fp16(v_[static_cast<size_t>(i) * kv + j]);
      }
    }
    attention(l, batch);
    project(l, LoraTarget::kO, layer.wo, att_.data(), n, proj_.data());
    add_into(x_.data(), proj_.data(), n * ud);

    // Feed-forward block: norm, SwiGLU, down projection.
    rms_norm(x_.data(), layer.ffn_norm, n, d, hp_.rms_eps, xb_.data());
    project(l, LoraTarget::kGate, layer.ffn_gate, xb_.data(), n, gate_.data());
    project(l, LoraTarget::kUp, layer.ffn_up, xb_.data(), n, up_.data());
    swiglu(gate_.data(), up_.data(), n, ff);
    project(l, LoraTarget::kDown, layer.ffn_down, gate_.data(), n, proj_.data());
    add_into(x_.data(), proj_.data(), n * ud);
  }

  // Output head, only for the tokens that want logits.
  n_logits_ = 0;
  for (int i = 0; i < n; ++i) {
    if (!batch[i].want_logits) continue;
    rms_norm(&x_[i * ud], model_.output_norm(), 1, d, hp_.rms_eps, &out_in_[n_logits_ * ud]);
    ++n_logits_;
  }
  if (n_logits_ == 0) return;
  if (tp_) tp_->matmul(model_.output(), out_in_.data(), n_logits_, logits_.data(), pool_, scratch_);
  else matmul(model_.output(), out_in_.data(), n_logits_, logits_.data(), pool_, scratch_);
}

void LlamaContext::project(int layer, LoraTarget target, const WeightView& w, const float* x, int n, float* y) {
  if (tp_) tp_->matmul(w, x, n, y, pool_, scratch_);
  else matmul(w, x, n, y, pool_, scratch_);
  if (!lora_groups_.empty()) apply_lora(layer, target, x, y);
}

// A counting sort of the adapted tokens by adapter, into buffers reserved for max_batch tokens.
void LlamaContext::group_by_adapter(std::span<const BatchToken> batch) {
  lora_groups_.clear();
  auto group_of = [&](const LoraAdapter* a) {
    for (size_t g = 0; g < lora_groups_.size(); ++g)
      if (lora_groups_[g].adapter == a) return g;
    lora_groups_.push_back({a, 0, 0});
    return lora_groups_.size() - 1;
  };
  for (const BatchToken& t : batch)
    if (t.adapter) ++lora_groups_[group_of(t.adapter)].count;
  int begin = 0;
  for (LoraGroup& g : lora_groups_) {
    g.begin = begin;
    begin += g.count;
    g.count = 0;  // refilled below as the fill cursor
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].adapter) continue;
    LoraGroup& g = lora_groups_[group_of(batch[i].adapter)];
    lora_rows_[static_cast<size_t>(g.begin + g.count++)] = static_cast<int>(i);
  }
}

// Rows of tokens on the base model, or on an adapter that leaves this matrix alone, are untouched,
// so they stay bit-identical to a batch without adapters.
void LlamaContext::apply_lora(int layer, LoraTarget target, const float* x, float* y) {
  // A decode step's LoRA products are a few thousand multiply-adds per token, less than one
  // hand-off to the pool's threads costs (measured: rank 8 on every matrix slowed decoding by
  // ~30% through the pool); only prefill-sized products are worth sharing.
  constexpr int64_t kParallelWork = 1 << 20;  // multiply-adds
  for (const LoraGroup& g : lora_groups_) {
    const LoraPair* p = g.adapter->pair(layer, target);
    if (!p) continue;
    const int64_t work = static_cast<int64_t>(g.count) * p->a.rows * (p->a.cols + p->b.rows);
    lora_add(*p, x, &lora_rows_[static_cast<size_t>(g.begin)], g.count, y, lora_x_.data(), lora_t_.data(),
             lora_y_.data(), work >= kParallelWork ? pool_ : lora_inline_, scratch_);
  }
}

// Grouped-query attention over each token's own sequence, positions [0, pos], one task per
// (token, head).
void LlamaContext::attention(int layer, std::span<const BatchToken> batch) {
  const int n = static_cast<int>(batch.size());
  const int hd = hp_.head_dim;
  const int group = hp_.n_head / hp_.n_head_kv;
  const int bs = cache_.block_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  pool_.parallel_for(n * hp_.n_head, [&](int task, int thread) {
    const int i = task / hp_.n_head, h = task % hp_.n_head;
    const BatchToken& t = batch[i];
    const int kv_off = (h / group) * hd;
    float* scores = &scores_[static_cast<size_t>(thread) * static_cast<size_t>((max_positions_ + 15) / 16 * 16)];
    float q16[256];  // head_dim <= 256, checked at load
    const float* q = &q_[static_cast<size_t>(i) * hp_.n_embd + static_cast<size_t>(h) * hd];
    for (int e = 0; e < hd; ++e) q16[e] = fp16_to_fp32(fp32_to_fp16(q[e]));

    // Scores up to the next multiple of 16: llama.cpp's softmax runs over whole 16-wide chunks
    // (its masked tail contributes exact zeros, as ours does).
    const int n_pos = t.pos + 1;
    const int n_padded = (n_pos + 15) / 16 * 16;
    float max_score = -INFINITY;
    for (int p = 0; p < n_pos; ++p) {
      const uint16_t* k = cache_.k(layer, t.seq->blocks[p / bs], p % bs) + kv_off;
      scores[p] = (t.generated ? dot_f32_f16_4acc(q16, k, hd) : dot_f32_f16(q16, k, hd)) * scale;
      max_score = std::max(max_score, scores[p]);
    }
    for (int p = n_pos; p < n_padded; ++p) scores[p] = -INFINITY;
    const float inv = static_cast<float>(1.0 / exp_and_sum(scores, n_padded, max_score));

    // Σ_p w_p · v_p accumulated as llama.cpp's dot products over positions do: position p in
    // lane p % 16 of one accumulator (prompts) or of accumulator (p / 16) % 4 (generated tokens),
    // lanes reduced at the end.
    const int groups = t.generated ? 4 : 1;
    float* lanes = &lanes_[static_cast<size_t>(thread) * 64 * static_cast<size_t>(hd)];
    std::fill(lanes, lanes + static_cast<size_t>(groups) * 16 * static_cast<size_t>(hd), 0.0f);
    for (int p = 0; p < n_pos; ++p) {
      const float w = fp16_to_fp32(fp32_to_fp16(scores[p] * inv));
      const uint16_t* v = cache_.v(layer, t.seq->blocks[p / bs], p % bs) + kv_off;
      const int lane = ((p / 16) % groups) * 16 + p % 16;
      axpy_f16(w, v, lanes + static_cast<size_t>(lane) * static_cast<size_t>(hd), hd);
    }
    float* out = &att_[static_cast<size_t>(i) * hp_.n_embd + static_cast<size_t>(h) * hd];
    if (t.generated) reduce_lane_groups(lanes, hd, out);
    else reduce_lanes(lanes, hd, out);
  });
}

std::span<const float> LlamaContext::logits(int i) const {
  if (i < 0 || i >= n_logits_) throw std::out_of_range("logits row " + std::to_string(i));
  return {&logits_[static_cast<size_t>(i) * hp_.n_vocab], static_cast<size_t>(hp_.n_vocab)};
}

}  // namespace vigil
