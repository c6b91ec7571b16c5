// StepCostModel: one exponentially weighted, ridge-regularised least-squares fit of every step's
// time on its shape (decode tokens, the K/V rows they read, and per class of chunk sizes the prompt
// tokens and the rows they read), its coefficients kept at or above 0.
#include "engine/step_cost.h"

#include <algorithm>
#include <cmath>

namespace vigil {
namespace {

// Each step keeps this share of the weight of the ones before it: an effective memory of ~50
// steps, a second or two of decoding.
constexpr double kKeep = 0.98;
constexpr double kRowsUnit = 1000;  // the fit counts K/V rows in thousands
// Ridge terms a unit of weight. The decodes' slopes, in squared decode tokens and squared
// thousands of rows: with little spread in batch sizes or contexts a slope is unknown, and stays
// near 0 (the mean cost) until steps of other sizes or depths are seen.
constexpr double kRidgeTokens = 1.0;
constexpr double kRidgeRows = (32.0 / kRowsUnit) * (32.0 / kRowsUnit);
// A class's cost a prompt row is drawn toward the decodes' c, a unit of the class's weight: until
// its steps' prompt rows vary by more than ~500 (the same chunk sizes at different depths), a row
// costs what a decode's does (dearer: steps stay within the target while it learns).
constexpr double kRidgePromptRows = 0.5 * 0.5;
constexpr double kRidgePromptTokens = 1e-9;  // numerical only
// A class whose steps weigh less than this (one step ~230 steps ago) borrows a neighbour's costs.
constexpr double kLearnedWeight = 0.01;
// The overrun quantile moves by this share of the step's prediction, times the quantile when the
// step runs over it and times its complement when not: it settles where kOverrunQuantile of the
// steps stay within it, in moves of the machine's own scale (milliseconds on a CPU, less on a GPU).
constexpr double kOverrunRate = 0.05;
constexpr double kOverrunTolerance = 1e-6;  // of the prediction: rounding is no overrun

constexpr std::size_t kDecodeTokens = 1, kDecodeRows = 2;
constexpr std::size_t prompt_tokens_at(std::size_t cls) { return 3 + 2 * cls; }
constexpr std::size_t prompt_rows_at(std::size_t cls) { return 4 + 2 * cls; }

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

StepCostModel::Vector StepCostModel::features(const StepShape& step) {
  Vector f{};
  f[0] = 1;
  f[kDecodeTokens] = step.decode_tokens;
  f[kDecodeRows] = static_cast<double>(step.decode_kv_rows) / kRowsUnit;
  if (step.prefill_tokens > 0) {
    const auto c = static_cast<std::size_t>(chunk_class(step.prefill_tokens));
    f[prompt_tokens_at(c)] = step.prefill_tokens;
    f[prompt_rows_at(c)] = static_cast<double>(step.prefill_kv_rows) / kRowsUnit;
  }
  return f;
}

void StepCostModel::observe(const StepShape& step, double seconds) {
  if (step.prefill_tokens == 0 && step.decode_tokens == 0) return;
  if (step.prefill_tokens > 0 && !decoded_) return;  // no decode step to tell the prompt's part by
  decoded_ = true;
  if (step.prefill_tokens > 0 && step.decode_tokens > 0) {
    // A class seen for the first time was priced at a neighbour's: a miss of learning, not of noise.
    const auto c = static_cast<std::size_t>(chunk_class(step.prefill_tokens));
    const double predicted = predict(step);
    if (learned(c) && predicted > 0) {
      const bool over = seconds - predicted > overrun_ + kOverrunTolerance * predicted;
      overrun_ += kOverrunRate * predicted * (over ? kOverrunQuantile : -(1 - kOverrunQuantile));
      overrun_ = std::max(0.0, overrun_);
    }
  }
  const Vector f = features(step);
  w_ = w_ * kKeep + 1;
  for (double& w : class_w_) w *= kKeep;
  if (step.prefill_tokens > 0) class_w_[static_cast<std::size_t>(chunk_class(step.prefill_tokens))] += 1;
  for (std::size_t i = 0; i < kFeatures; ++i) {
    for (std::size_t j = 0; j < kFeatures; ++j) ff_[i][j] = ff_[i][j] * kKeep + f[i] * f[j];
    fy_[i] = fy_[i] * kKeep + f[i] * seconds;
  }
  solve();
}

bool StepCostModel::learned(std::size_t cls) const { return class_w_[cls] >= kLearnedWeight; }

void StepCostModel::solve() {
  // The normal equations with the ridge terms; the intercept is free.
  std::array<Vector, kFeatures> a = ff_;
  a[kDecodeTokens][kDecodeTokens] += w_ * kRidgeTokens;
  a[kDecodeRows][kDecodeRows] += w_ * kRidgeRows;
  for (std::size_t c = 0; c < kClasses; ++c) {
    const std::size_t t = prompt_tokens_at(c), r = prompt_rows_at(c);
    a[t][t] += class_w_[c] * kRidgePromptTokens;
    // class_w_ kRidgePromptRows (row_c - row)^2: toward the decodes' row.
    const double pull = class_w_[c] * kRidgePromptRows;
    a[r][r] += pull;
    a[kDecodeRows][kDecodeRows] += pull;
    a[r][kDecodeRows] -= pull;
    a[kDecodeRows][r] -= pull;
  }
  // Which coefficients are fitted: not those of classes too little seen, nor those a fit put
  // below 0 (more work never costs less: the most negative is held at 0 and the rest refitted).
  std::array<bool, kFeatures> free{};
  free[0] = free[kDecodeTokens] = free[kDecodeRows] = true;
  for (std::size_t c = 0; c < kClasses; ++c) free[prompt_tokens_at(c)] = free[prompt_rows_at(c)] = learned(c);
  Vector x{};
  for (std::size_t round = 0; round < kFeatures; ++round) {
    std::array<std::size_t, kFeatures> at{};
    std::size_t n = 0;
    for (std::size_t i = 0; i < kFeatures; ++i)
      if (free[i]) at[n++] = i;
    // Gaussian elimination with partial pivoting on the free rows and columns.
    std::array<std::array<double, kFeatures + 1>, kFeatures> m{};
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) m[i][j] = a[at[i]][at[j]];
      m[i][n] = fy_[at[i]];
    }
    bool singular = false;
    for (std::size_t col = 0; col < n && !singular; ++col) {
      std::size_t pivot = col;
      for (std::size_t i = col + 1; i < n; ++i)
        if (std::abs(m[i][col]) > std::abs(m[pivot][col])) pivot = i;
      if (!(std::abs(m[pivot][col]) > 0)) {
        singular = true;
        break;
      }
      std::swap(m[col], m[pivot]);
      for (std::size_t i = col + 1; i < n; ++i) {
        const double k = m[i][col] / m[col][col];
        for (std::size_t j = col; j <= n; ++j) m[i][j] -= k * m[col][j];
      }
    }
    if (singular) return;  // keep the last fit
    x = {};
    for (std::size_t i = n; i-- > 0;) {
      double v = m[i][n];
      for (std::size_t j = i + 1; j < n; ++j) v -= m[i][j] * x[at[j]];
      x[at[i]] = v / m[i][i];
    }
    std::size_t worst = 0;
    for (std::size_t i = 1; i < kFeatures; ++i)
      if (free[i] && x[i] < 0 && (worst == 0 || x[i] < x[worst])) worst = i;
    if (worst == 0) break;
    free[worst] = false;
    x[worst] = 0;
  }
  coef_ = x;
}

double StepCostModel::decode_seconds(int decode_tokens, int64_t kv_rows) const {
  return std::max(0.0, coef_[0] + coef_[kDecodeTokens] * decode_tokens +
                           coef_[kDecodeRows] * static_cast<double>(kv_rows) / kRowsUnit);
}

double StepCostModel::kv_row_seconds() const { return coef_[kDecodeRows] / kRowsUnit; }

StepCostModel::PromptLine StepCostModel::nearest_line(int prefill_tokens) const {
  const int c = chunk_class(prefill_tokens);
  const int n = static_cast<int>(kClasses);
  for (int distance = 0; distance < n; ++distance)
    for (int at : {c - distance, c + distance})
      if (at >= 0 && at < n && learned(static_cast<std::size_t>(at))) {
        const auto k = static_cast<std::size_t>(at);
        return {coef_[prompt_tokens_at(k)], coef_[prompt_rows_at(k)] / kRowsUnit};
      }
  return {};
}

double StepCostModel::prefill_token_seconds(int prefill_tokens) const { return nearest_line(prefill_tokens).token; }

double StepCostModel::prefill_kv_row_seconds(int prefill_tokens) const { return nearest_line(prefill_tokens).row; }

double StepCostModel::predict(const StepShape& step) const {
  const double prompt =
      step.prefill_tokens > 0 ? nearest_line(step.prefill_tokens).seconds(step.prefill_tokens, step.prefill_kv_rows) : 0.0;
  return decode_seconds(step.decode_tokens, step.decode_kv_rows) + prompt;
}

int StepCostModel::prompt_fit(double room, int tokens_before, int64_t rows_before, int start, int max_tokens) const {
  bool any = false;
  for (std::size_t c = 0; c < kClasses; ++c) any = any || learned(c);
  if (!any) return max_tokens;
  if (room <= 0) return 0;
  // A chunk that fits exactly is not lost to rounding.
  const double limit = room * (1 + 1e-9) + 1e-12;
  std::array<PromptLine, kClasses> lines;
  double cheapest = -1;
  for (size_t c = 0; c < lines.size(); ++c) {
    lines[c] = nearest_line(kChunkClassStart[c]);
    cheapest = cheapest < 0 ? lines[c].token : std::min(cheapest, lines[c].token);
  }
  int best = 0;
  for (int n = 1; n <= max_tokens; ++n) {
    const int p = tokens_before + n;
    if (p * cheapest > limit) break;  // no class is cheap enough for this many
    // Priced at the dearer of its class's line and the next class's, which bounds the cost anywhere
    // inside the class whether it falls or rises with the chunk's size.
    const auto c = static_cast<size_t>(chunk_class(p));
    const int64_t rows = rows_before + prompt_kv_rows(start, n);
    double cost = lines[c].seconds(p, rows);
    if (c + 1 < lines.size() && kChunkClassStart[c + 1] - 1 > kChunkClassStart[c])
      cost = std::max(cost, lines[c + 1].seconds(p, rows));
    if (cost <= limit) best = n;
  }
  return best;
}

}  // namespace vigil
