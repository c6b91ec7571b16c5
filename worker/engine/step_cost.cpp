// StepCostModel: an exponentially weighted plane for decode-only steps (decode tokens, K/V rows
// read) and an exponentially weighted marginal cost per prompt token for each class of chunk
// sizes, learned from every step.
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
// Ridge terms of the plane, in squared decode tokens and squared K/V rows: with little spread in
// batch sizes or contexts a slope is unknown, and stays near 0 (the mean cost) until steps of
// other sizes or depths are seen.
constexpr double kRidgeTokens = 1.0;
constexpr double kRidgeRows = 32.0 * 32.0;
// The overrun quantile moves by this share of the step's prediction, times the quantile when the
// step runs over it and times its complement when not: it settles where kOverrunQuantile of the
// steps stay within it, in moves of the machine's own scale (milliseconds on a CPU, less on a GPU).
constexpr double kOverrunRate = 0.05;
constexpr double kOverrunTolerance = 1e-6;  // of the prediction: rounding is no overrun

}  // namespace

int64_t prompt_kv_rows(int start, int tokens) {
  const int64_t s = start, n = tokens;
  return n * s + n * (n + 1) / 2;
}

int StepCostModel::chunk_class(int prefill_tokens) {
  const auto& starts = kChunkClassStart;
  const auto above = std::upper_bound(starts.begin(), starts.end(), std::max(1, prefill_tokens));
  return static_cast<int>(above - starts.begin()) - 1;
}

void StepCostModel::observe(const StepShape& step, double seconds) {
  if (step.prefill_tokens == 0) {
    if (step.decode_tokens == 0) return;
    const double x = step.decode_tokens, r = static_cast<double>(step.decode_kv_rows);
    w_ = w_ * kDecodeKeep + 1;
    sx_ = sx_ * kDecodeKeep + x;
    sr_ = sr_ * kDecodeKeep + r;
    sy_ = sy_ * kDecodeKeep + seconds;
    sxx_ = sxx_ * kDecodeKeep + x * x;
    srr_ = srr_ * kDecodeKeep + r * r;
    sxr_ = sxr_ * kDecodeKeep + x * r;
    sxy_ = sxy_ * kDecodeKeep + x * seconds;
    sry_ = sry_ * kDecodeKeep + r * seconds;
    return;
  }
  if (w_ == 0) return;  // no decode plane to subtract yet
  const auto c = static_cast<size_t>(chunk_class(step.prefill_tokens));
  // A class seen for the first time was priced at a neighbour's: a miss of learning, not of noise.
  if (step.decode_tokens > 0 && learned_[c]) {
    const double predicted = predict(step);
    if (predicted > 0) {
      const bool over = seconds - predicted > overrun_ + kOverrunTolerance * predicted;
      overrun_ += kOverrunRate * predicted * (over ? kOverrunQuantile : -(1 - kOverrunQuantile));
      overrun_ = std::max(0.0, overrun_);
    }
  }
  // The step without its prompt tokens costs what a decode step of its decodes (at least one:
  // the step's fixed part, reading every weight once) costs; the prompt's K/V reads are priced by
  // the plane's cost a row.
  const double others = decode_seconds(std::max(1, step.decode_tokens), step.decode_kv_rows) +
                        kv_row_seconds() * static_cast<double>(step.prefill_kv_rows);
  const double per_token = std::max(0.0, (seconds - others) / step.prefill_tokens);
  prefill_token_[c] = learned_[c] ? prefill_token_[c] + kPrefillStep * (per_token - prefill_token_[c]) : per_token;
  learned_[c] = true;
}

namespace {

// The ridge least-squares plane y = mean_y + b (x - mean_x) + c (r - mean_r), b and c >= 0.
struct Plane {
  double mean_x = 0, mean_r = 0, mean_y = 0, b = 0, c = 0;
};

Plane fit(double w, double sx, double sr, double sy, double sxx, double srr, double sxr, double sxy, double sry) {
  Plane p{sx / w, sr / w, sy / w, 0, 0};
  const double vxx = sxx / w - p.mean_x * p.mean_x + kRidgeTokens;
  const double vrr = srr / w - p.mean_r * p.mean_r + kRidgeRows;
  const double vxr = sxr / w - p.mean_x * p.mean_r;
  const double cxy = sxy / w - p.mean_x * p.mean_y;
  const double cry = sry / w - p.mean_r * p.mean_y;
  const double det = vxx * vrr - vxr * vxr;
  if (det > 0) {
    p.b = (cxy * vrr - cry * vxr) / det;
    p.c = (vxx * cry - vxr * cxy) / det;
  }
  // A negative slope is noise (more work never costs less): refit the other one alone.
  if (p.b < 0 || !(det > 0)) {
    p.b = 0;
    p.c = std::max(0.0, cry / vrr);
  } else if (p.c < 0) {
    p.c = 0;
    p.b = std::max(0.0, cxy / vxx);
  }
  return p;
}

}  // namespace

double StepCostModel::decode_seconds(int decode_tokens, int64_t kv_rows) const {
  if (w_ == 0) return 0;
  const Plane p = fit(w_, sx_, sr_, sy_, sxx_, srr_, sxr_, sxy_, sry_);
  return std::max(0.0, p.mean_y + p.b * (decode_tokens - p.mean_x) + p.c * (static_cast<double>(kv_rows) - p.mean_r));
}

double StepCostModel::kv_row_seconds() const {
  return w_ == 0 ? 0 : fit(w_, sx_, sr_, sy_, sxx_, srr_, sxr_, sxy_, sry_).c;
}

double StepCostModel::prefill_token_seconds(int prefill_tokens) const {
  const int c = chunk_class(prefill_tokens);
  const int n = static_cast<int>(kChunkClassStart.size());
  for (int distance = 0; distance < n; ++distance)
    for (int at : {c - distance, c + distance})
      if (at >= 0 && at < n && learned_[static_cast<size_t>(at)]) return prefill_token_[static_cast<size_t>(at)];
  return 0;
}

double StepCostModel::prefill_price(int prefill_tokens) const {
  const size_t c = static_cast<size_t>(chunk_class(prefill_tokens));
  const int lo = kChunkClassStart[c];
  double price = prefill_token_seconds(lo);
  if (c + 1 < kChunkClassStart.size() && kChunkClassStart[c + 1] - 1 > lo)
    price = std::max(price, prefill_token_seconds(kChunkClassStart[c + 1]));
  return price;
}

double StepCostModel::predict(const StepShape& step) const {
  const double prompt = step.prefill_tokens > 0 ? step.prefill_tokens * prefill_token_seconds(step.prefill_tokens) +
                                                       kv_row_seconds() * static_cast<double>(step.prefill_kv_rows)
                                                 : 0.0;
  return decode_seconds(step.decode_tokens, step.decode_kv_rows) + prompt;
}

int StepCostModel::prompt_fit(double room, int tokens_before, int64_t rows_before, int start, int max_tokens) const {
  if (std::none_of(learned_.begin(), learned_.end(), [](bool b) { return b; })) return max_tokens;
  if (room <= 0) return 0;
  // A chunk that fits exactly is not lost to rounding.
  const double limit = room * (1 + 1e-9) + 1e-12;
  double cheapest = prefill_token_seconds(kChunkClassStart[0]);
  for (int lo : kChunkClassStart) cheapest = std::min(cheapest, prefill_token_seconds(lo));
  const double per_row = kv_row_seconds();
  int best = 0;
  for (int n = 1; n <= max_tokens; ++n) {
    const int p = tokens_before + n;
    if (p * cheapest > limit) break;  // no class is cheap enough for this many
    const double cost = p * prefill_price(p) + per_row * static_cast<double>(rows_before + prompt_kv_rows(start, n));
    if (cost <= limit) best = n;
  }
  return best;
}

}  // namespace vigil
