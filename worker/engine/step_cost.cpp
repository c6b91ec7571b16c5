// StepCostModel: an exponentially weighted line for decode-only steps and an exponentially
// weighted marginal cost per prompt token, learned from every step.
#include "engine/step_cost.h"

#include <algorithm>
#include <cmath>

namespace vigil {
namespace {

// Each decode-only step keeps this share of the weight of the ones before it (an effective
// memory of ~50 steps: a second or two of decoding), and each prompt-token estimate moves this
// far toward the new one.
constexpr double kDecodeKeep = 0.98;
constexpr double kPrefillStep = 0.2;
// Prompt-token estimates need enough tokens that the decode part's error does not dominate.
constexpr int kMinPrefillSample = 8;

}  // namespace

void StepCostModel::seed(double decode_seconds, int prefill_tokens, double prefill_seconds) {
  w_ = 1;
  sx_ = 1;
  sy_ = decode_seconds;
  sxx_ = 1;
  sxy_ = decode_seconds;
  prefill_token_ = std::max(0.0, (prefill_seconds - decode_seconds) / std::max(1, prefill_tokens - 1));
  seeded_ = true;
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
  if (prefill_tokens < kMinPrefillSample || w_ == 0) return;
  // The step without its prompt tokens costs what a decode step of its decodes (at least one:
  // the step's fixed part, reading every weight once) costs.
  const double per_token = std::max(0.0, (seconds - decode_seconds(std::max(1, decode_tokens))) / prefill_tokens);
  prefill_token_ = seeded_ ? prefill_token_ + kPrefillStep * (per_token - prefill_token_) : per_token;
  seeded_ = true;
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

int StepCostModel::prefill_budget(int decode_tokens, double target_seconds, int max_tokens) const {
  if (prefill_token_ <= 0) return max_tokens;  // nothing learned yet
  const double room = target_seconds - decode_seconds(decode_tokens);
  if (room <= 0) return 0;
  return static_cast<int>(std::min<double>(max_tokens, std::floor(room / prefill_token_)));
}

}  // namespace vigil
