// The CPU backend's forward pass (see cpu_forward.h).
//
// Numerics follow llama.cpp's CPU path so greedy outputs match it token for token: RMSNorm sums
// in double, RoPE angles by repeated float multiplication and rotations with llama.cpp's fused
// multiply-adds, K/V cached as f16, queries rounded to f16 before Q·K, softmax sums in double,
// attention weights rounded to f16 before weighting V.
#include "backend/cpu/cpu_forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cpu/lora_apply.h"
#include "kernels/cpu/attention_ops.h"
#include "kernels/cpu/fp16.h"

namespace vigil {
namespace {

// out = x / rms(x) * weight, row by row.
void rms_norm_rows(const float* x, const float* weight, int n_rows, int n, float eps, float* out) {
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
void swiglu_rows(float* gate, const float* up, int n_rows, int n) {
  for (int r = 0; r < n_rows; ++r)
    swiglu_row(gate + static_cast<size_t>(r) * n, up + static_cast<size_t>(r) * n, n);
}

}  // namespace

CpuForward::CpuForward(const LlamaModel& model, KvCache& cache, ThreadPool& pool, int max_batch, int max_positions)
    : model_(model),
      hp_(model.hparams()),
      cache_(cache),
      pool_(pool),
      max_batch_(max_batch),
      max_positions_(max_positions),
      rope_(make_rope_table(hp_, max_positions)) {
  if (max_batch <= 0 || max_positions <= 0)
    throw std::invalid_argument("context needs max_batch and max_positions > 0");
  const size_t b = static_cast<size_t>(max_batch);
  for (int a = 0; a < kActs; ++a)
    acts_[static_cast<size_t>(a)].resize(b * static_cast<size_t>(act_width(static_cast<Act>(a), hp_)));
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
}

void CpuForward::check(std::span<const BatchToken> batch) const {
  if (batch.size() > static_cast<size_t>(max_batch_))
    throw std::invalid_argument("batch of " + std::to_string(batch.size()) + " tokens exceeds max_batch " +
                                std::to_string(max_batch_));
  for (const BatchToken& t : batch) {
    if (t.token < 0 || t.token >= hp_.n_vocab)
      throw std::invalid_argument("token id " + std::to_string(t.token) + " outside the vocabulary");
    if (t.pos < 0 || t.pos >= max_positions_)
      throw std::invalid_argument("position " + std::to_string(t.pos) + " outside the context of " +
                                  std::to_string(max_positions_));
    if (!t.seq || static_cast<size_t>(t.pos / cache_.block_size()) >= t.seq->blocks.size())
      throw std::invalid_argument("position " + std::to_string(t.pos) + " has no KV cache block reserved");
    if (tp_ && t.adapter)
      throw std::invalid_argument("LoRA adapters are not supported with tensor parallelism");
  }
}

void CpuForward::forward(std::span<const BatchToken> batch) {
  if (batch.empty()) return;
  check(batch);
  // Held for the whole pass: the leader's heartbeat must not interleave with its collectives.
  std::unique_lock<std::mutex> tp_lock;
  if (tp_) tp_lock = tp_->begin_forward(tp_->leader() ? plan_.encode(batch) : std::span<int32_t>{});
  batch_ = batch;
  group_by_adapter();
  if (!profile_) {
    llama_forward(hp_, *this);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  ProfiledOps<CpuForward> ops(*this, *profile_);
  llama_forward(hp_, ops);
  profile_->forward_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++profile_->forwards;
}

void CpuForward::embed(Act out) {
  const WeightView& e = model_.token_embd();
  const size_t row_bytes = e.row_bytes();
  float* x = act(out);
  for (size_t i = 0; i < batch_.size(); ++i)
    dequantize_row(e.type, e.data + static_cast<size_t>(batch_[i].token) * row_bytes, hp_.n_embd,
                   x + i * static_cast<size_t>(hp_.n_embd));
}

void CpuForward::rms_norm(int layer, SublayerNorm norm, Act in, Act out) {
  const LlamaLayer& l = model_.layers()[static_cast<size_t>(layer)];
  rms_norm_rows(act(in), norm == SublayerNorm::kAttn ? l.attn_norm : l.ffn_norm, static_cast<int>(batch_.size()),
                    hp_.n_embd, hp_.rms_eps, act(out));
}

void CpuForward::project(int layer, LayerMatrix m, Act in, Act out) {
  const float* x = act(in);
  float* y = act(out);
  matmul(model_.layers()[static_cast<size_t>(layer)].matrix(m), x, static_cast<int>(batch_.size()), y);
  if (!lora_groups_.empty()) apply_lora(layer, m, x, y);
}

void CpuForward::matmul(const WeightView& w, const float* x, int n, float* y) {
  if (split_) split_->run(w, x, n, y, pool_, scratch_);
  else ::vigil::matmul(w, x, n, y, pool_, scratch_);
}

// Adjacent pairs rotate (the GGUF q/k weights are permuted for this layout).
void CpuForward::rope(Act q_act, Act k_act) {
  float* q = act(q_act);
  float* k = act(k_act);
  const size_t d = static_cast<size_t>(hp_.n_embd), kv = static_cast<size_t>(hp_.kv_dim());
  for (size_t i = 0; i < batch_.size(); ++i) {
    const float* c = rope_.cos_at(batch_[i].pos);
    const float* s = rope_.sin_at(batch_[i].pos);
    for (int h = 0; h < hp_.n_head; ++h) rope_pairs(&q[i * d + static_cast<size_t>(h * hp_.head_dim)], hp_.head_dim, c, s);
    for (int h = 0; h < hp_.n_head_kv; ++h)
      rope_pairs(&k[i * kv + static_cast<size_t>(h * hp_.head_dim)], hp_.head_dim, c, s);
  }
}

void CpuForward::store_kv(int layer, Act k_act, Act v_act) {
  const float* k = act(k_act);
  const float* v = act(v_act);
  const size_t kv = static_cast<size_t>(hp_.kv_dim());
  for (size_t i = 0; i < batch_.size(); ++i) {
    const int32_t block = batch_[i].seq->blocks[static_cast<size_t>(batch_[i].pos / cache_.block_size())];
    const int slot = batch_[i].pos % cache_.block_size();
    uint16_t* kc = cache_.k(layer, block, slot);
    uint16_t* vc = cache_.v(layer, block, slot);
    for (size_t j = 0; j < kv; ++j) {
      kc[j] = fp32_to_fp16(k[i * kv + j]);
      vc[j] = fp32_to_fp16(v[i * kv + j]);
    }
  }
}

void CpuForward::add(Act acc, Act x) {
  add_into(act(acc), act(x), batch_.size() * static_cast<size_t>(act_width(acc, hp_)));
}

void CpuForward::swiglu(Act gate, Act up) {
  swiglu_rows(act(gate), act(up), static_cast<int>(batch_.size()), hp_.n_ff);
}

// Only the tokens that want logits go through the final norm and the output matrix.
void CpuForward::output_head(Act x_act) {
  const float* x = act(x_act);
  const size_t d = static_cast<size_t>(hp_.n_embd);
  n_logits_ = 0;
  for (size_t i = 0; i < batch_.size(); ++i) {
    if (!batch_[i].want_logits) continue;
    rms_norm_rows(&x[i * d], model_.output_norm(), 1, hp_.n_embd, hp_.rms_eps,
                      &out_in_[static_cast<size_t>(n_logits_) * d]);
    ++n_logits_;
  }
  if (n_logits_ > 0) matmul(model_.output(), out_in_.data(), n_logits_, logits_.data());
}

// A counting sort of the adapted tokens by adapter, into buffers reserved for max_batch tokens.
void CpuForward::group_by_adapter() {
  const std::span<const BatchToken> batch = batch_;
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
void CpuForward::apply_lora(int layer, LayerMatrix target, const float* x, float* y) {
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
void CpuForward::attention(int layer, Act q_act, Act out_act) {
  const std::span<const BatchToken> batch = batch_;
  const float* q_all = act(q_act);
  float* out_all = act(out_act);
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
    const float* q = &q_all[static_cast<size_t>(i) * hp_.n_embd + static_cast<size_t>(h) * hd];
    round_to_fp16(q, 1.0f, q16, hd);

    // Scores up to the next multiple of 16: llama.cpp's softmax runs over whole 16-wide chunks
    // (its masked tail contributes exact zeros, as ours does).
    const int n_pos = t.pos + 1;
    const int n_padded = (n_pos + 15) / 16 * 16;
    const auto score_rows = t.generated ? dot_rows_f16_4acc : dot_rows_f16;
    for (int p = 0; p < n_pos; p += bs) {
      const uint16_t* k = cache_.k(layer, t.seq->blocks[p / bs], 0) + kv_off;
      score_rows(q16, k, static_cast<size_t>(cache_.kv_dim()), std::min(bs, n_pos - p), hd, scale, scores + p);
    }
    float max_score = -INFINITY;
    for (int p = 0; p < n_pos; ++p) max_score = std::max(max_score, scores[p]);
    for (int p = n_pos; p < n_padded; ++p) scores[p] = -INFINITY;
    const float inv = static_cast<float>(1.0 / exp_and_sum(scores, n_padded, max_score));
    round_to_fp16(scores, inv, scores, n_pos);  // the weights, as llama.cpp's f16 softmax output

    // Σ_p w_p · v_p accumulated as llama.cpp's dot products over positions do: position p in
    // lane p % 16 of one accumulator (prompts) or of accumulator (p / 16) % 4 (generated tokens),
    // lanes reduced at the end.
    const int groups = t.generated ? 4 : 1;
    float* lanes = &lanes_[static_cast<size_t>(thread) * 64 * static_cast<size_t>(hd)];
    std::fill(lanes, lanes + static_cast<size_t>(groups) * 16 * static_cast<size_t>(hd), 0.0f);
    for (int p = 0; p < n_pos; ++p) {
      const float w = scores[p];
      const uint16_t* v = cache_.v(layer, t.seq->blocks[p / bs], p % bs) + kv_off;
      const int lane = ((p / 16) % groups) * 16 + p % 16;
      axpy_f16(w, v, lanes + static_cast<size_t>(lane) * static_cast<size_t>(hd), hd);
    }
    float* out = &out_all[static_cast<size_t>(i) * hp_.n_embd + static_cast<size_t>(h) * hd];
    if (t.generated) reduce_lane_groups(lanes, hd, out);
    else reduce_lanes(lanes, hd, out);
  });
}

std::span<const float> CpuForward::logits(int i) const {
  if (i < 0 || i >= n_logits_) throw std::out_of_range("logits row " + std::to_string(i));
  return {&logits_[static_cast<size_t>(i) * hp_.n_vocab], static_cast<size_t>(hp_.n_vocab)};
}

}  // namespace vigil
