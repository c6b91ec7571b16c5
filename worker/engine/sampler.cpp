// Turns logits into the next token: penalties, top-k, top-p, min-p, temperature, seeded draw.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vigil {

std::string SamplingParams::validate() const {
  if (!(temperature >= 0.0f && temperature <= 100.0f)) return "temperature: must be in [0, 100]";
  if (top_k < 0) return "top_k: must be >= 0";
  if (!(top_p > 0.0f && top_p <= 1.0f)) return "top_p: must be in (0, 1]";
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return "min_p: must be in [0, 1]";
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f))
    return "repetition_penalty: must be in (0, 10]";
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) return "presence_penalty: must be in [-2, 2]";
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return "frequency_penalty: must be in [-2, 2]";
  if (penalty_last_n < 0) return "penalty_last_n: must be >= 0";
  return "";
}

Sampler::Sampler(const SamplingParams& params, int n_vocab)
    : params_(params), rng_state_(params.seed) {
  if (std::string err = params.validate(); !err.empty()) throw std::invalid_argument(err);
  candidates_.reserve(static_cast<size_t>(n_vocab));
  window_.reserve(static_cast<size_t>(params.penalty_last_n));
}

double Sampler::next_uniform() {
  uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

void Sampler::apply_penalties(std::span<const int32_t> history) {
  const bool any = params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                   params_.frequency_penalty != 0.0f;
  if (!any || params_.penalty_last_n == 0 || history.empty()) return;
  const size_t n = std::min(history.size(), static_cast<size_t>(params_.penalty_last_n));
  window_.assign(history.end() - static_cast<long>(n), history.end());
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    size_t j = i;
    while (j < window_.size() && window_[j] == window_[i]) ++j;
    const int32_t id = window_[i];
    if (id >= 0 && static_cast<size_t>(id) < candidates_.size()) {
      float& logit = candidates_[static_cast<size_t>(id)].first;
      logit = logit > 0 ? logit / params_.repetition_penalty : logit * params_.repetition_penalty;
      logit -= static_cast<float>(j - i) * params_.frequency_penalty + params_.presence_penalty;
    }
    i = j;
  }
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
  apply_penalties(history);

  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (params_.temperature == 0.0f)
    return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->second;

  // Keep the top_k best (all when off), sorted best first.
  size_t keep = candidates_.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(keep), candidates_.end(),
                    by_logit);
  candidates_.resize(keep);

  // Softmax at temperature 1 for top-p and min-p (as llama.cpp: filters before temperature).
  const float max_logit = candidates_.front().first;
  double total = 0.0;
  for (auto& c : candidates_) total += std::exp(static_cast<double>(c.first - max_logit));
  if (params_.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t cut = candidates_.size();
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cumulative += std::exp(static_cast<double>(candidates_[i].first - max_logit)) / total;
      if (cumulative >= static_cast<double>(params_.top_p)) {
        cut = i + 1;
        break;
      }
    }
    candidates_.resize(cut);
  }
  if (params_.min_p > 0.0f) {
    // p_i >= min_p * p_max  <=>  logit_i >= max_logit + ln(min_p)
    const float floor = max_logit + std::log(params_.min_p);
    size_t cut = 1;
    while (cut < candidates_.size() && candidates_[cut].first >= floor) ++cut;
    candidates_.resize(cut);
  }

  // Temperature, then a draw from what is left.
  double sum = 0.0;
  for (auto& c : candidates_) sum += std::exp(static_cast<double>((c.first - max_logit) / params_.temperature));
  double target = next_uniform() * sum;
  for (auto& c : candidates_) {
    target -= std::exp(static_cast<double>((c.first - max_logit) / params_.temperature));
    if (target < 0.0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace vigil
