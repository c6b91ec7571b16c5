// StepCostModel: an exponentially weighted line for decode-only steps and an exponentially
// weighted marginal cost per prompt token for each class of chunk sizes, learned from every step.
#include "engine/step_cost.h"

#include <algorithm>
#include <cmath>

namespace vigil {
namespace {

// Each decode-only step keeps this share of the weight of the ones before it (an effective
// memory of ~50 steps: a second or two of decoding), and each prompt-token estimate moves this
// far toward the new one. A one-token chunk's sample is as noisy as the step it rode on; the
// average over ~10 of its class's steps is what the budget reads.
constexpr double kDecodeKeep = 0.98;
constexpr double kPrefillStep = 0.2;

}  // namespace

int StepCostModel::chunk_class(int prefill_tokens) {
  const auto& starts = kChunkClassStart;
  const auto above = std::upper_bound(starts.begin(), starts.end(), std::max(1, prefill_tokens));
  return static_cast<int>(above - starts.begin()) - 1;
}

void StepCostModel::seed_decode(double decode_seconds) {
  w_ = 1;
  sx_ = 1;
  sy_ = decode_seconds;
  sxx_ = 1;
  sxy_ = decode_seconds;
}

void StepCostModel::observe(int decode_tokens, int prefill_tokens, double seconds) {
  if (prefill_tokens == 0) {
    if (decode_tokens == 0) return;
    const double x = decode_tokens;
    w_ = w_ * kDecodeKeep + 1;
    sx_ = sx_ * kDecodeKeep + x;
    sy_ = sy_ * kDecodeKeep + seconds;
    sxx_ = sxx_ * kDecodeKeep + x * x;
    sxy_ = sxy_ * kDecodeKeep + x * seconds;
    return;
  }
  if (w_ == 0) return;  // no decode line to subtract yet
  // The step without its prompt tokens costs what a decode step of its decodes (at least one:
  // the step's fixed part, reading every weight once) costs.
  const double per_token = std::max(0.0, (seconds - decode_seconds(std::max(1, decode_tokens))) / prefill_tokens);
  const auto c = static_cast<size_t>(chunk_class(prefill_tokens));
  prefill_token_[c] = learned_[c] ? prefill_token_[c] + kPrefillStep * (per_token - prefill_token_[c]) : per_token;
  learned_[c] = true;
}

double StepCostModel::decode_seconds(int decode_tokens) const {
  if (w_ == 0) return 0;
  const double mean_x = sx_ / w_, mean_y = sy_ / w_;
  // With little spread in batch sizes the slope is unknown: the ridge term keeps it near 0 (the
  // mean cost) until steps of other sizes are seen.
  const double var_x = sxx_ / w_ - mean_x * mean_x;
  const double cov_xy = sxy_ / w_ - mean_x * mean_y;
  const double slope = std::max(0.0, cov_xy / (var_x + 1.0));
  return std::max(0.0, mean_y + slope * (decode_tokens - mean_x));
}

double StepCostModel::prefill_token_seconds(int prefill_tokens) const {
  const int c = chunk_class(prefill_tokens);
  const int n = static_cast<int>(kChunkClassStart.size());
  for (int distance = 0; distance < n; ++distance)
    for (int at : {c - distance, c + distance})
      if (at >= 0 && at < n && learned_[static_cast<size_t>(at)]) return prefill_token_[static_cast<size_t>(at)];
  return 0;
}

int StepCostModel::prefill_budget(int decode_tokens, double target_seconds, int max_tokens) const {
  if (std::none_of(learned_.begin(), learned_.end(), [](bool b) { return b; })) return max_tokens;
  const double room = target_seconds - decode_seconds(decode_tokens);
  if (room <= 0) return 0;
  // A class's chunks are priced at the dearer of its own rate and the next class's, which bounds
  // the rate anywhere inside it whether cost a token falls or rises with the chunk's size; the
  // largest chunk of each class that fits is then room / price (a chunk that fits exactly is not
  // lost to rounding), the answer the largest over them.
  int best = 0;
  const size_t n = kChunkClassStart.size();
  for (size_t c = 0; c < n && kChunkClassStart[c] <= max_tokens; ++c) {
    const int lo = kChunkClassStart[c];
    const int hi = c + 1 < n ? std::min(max_tokens, kChunkClassStart[c + 1] - 1) : max_tokens;
    double cost = prefill_token_seconds(lo);
    if (hi > lo && c + 1 < n) cost = std::max(cost, prefill_token_seconds(kChunkClassStart[c + 1]));
    const int fits = cost > 0 ? static_cast<int>(std::min<double>(hi, std::floor(room / cost + 1e-9))) : hi;
    if (fits >= lo) best = std::max(best, fits);
  }
  return best;
}

}  // namespace vigil
