// Sampler: greedy, each filter, penalties, seeded reproducibility, parameter validation.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

namespace vigil {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s({}, 5);
  EXPECT_EQ(s.sample(logits_of({0.1f, 3.0f, -1.0f, 2.9f, 0.0f}), {}), 1);
  EXPECT_EQ(s.sample(logits_of({1.0f, 2.0f, 2.0f}), {}), 1);
}

TEST(Sampler, RepetitionPenaltyAsLlamaCpp) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  Sampler s(p, 3);
  // Token 0 (logit 3) seen: 3/2 = 1.5 < 2 -> token 1 wins.
  EXPECT_EQ(s.sample(logits_of({3.0f, 2.0f, -1.0f}), std::vector<int32_t>{0}), 1);
  // Negative logits are multiplied: -1 * 2 = -2 < -1.5.
  EXPECT_EQ(s.sample(logits_of({-1.5f, -1.0f, -9.0f}), std::vector<int32_t>{1}), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesAsOpenAI) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  Sampler s(p, 2);
  // Token 0 seen 3 times: 2.0 - 1.5 = 0.5 < 1.0.
  EXPECT_EQ(s.sample(logits_of({2.0f, 1.0f}), std::vector<int32_t>{0, 0, 0}), 1);
  // Seen once: 2.0 - 0.5 = 1.5 > 1.0.
  EXPECT_EQ(s.sample(logits_of({2.0f, 1.0f}), std::vector<int32_t>{0}), 0);
  SamplingParams q;
  q.presence_penalty = 1.5f;
  Sampler t(q, 2);
  EXPECT_EQ(t.sample(logits_of({2.0f, 1.0f}), std::vector<int32_t>{0, 0}), 1);
}

TEST(Sampler, PenaltyWindowOnlyCoversLastN) {
  SamplingParams p;
  p.presence_penalty = 2.0f;
  p.penalty_last_n = 2;
  Sampler s(p, 2);
  // Token 0 appears only outside the last 2 tokens: no penalty.
  EXPECT_EQ(s.sample(logits_of({2.0f, 1.0f}), std::vector<int32_t>{0, 1, 1}), 0);
}

std::map<int32_t, int> histogram(SamplingParams p, const std::vector<float>& logits, int n) {
  Sampler s(p, static_cast<int>(logits.size()));
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) h[s.sample(logits, {})]++;
  return h;
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  auto h = histogram(p, {1.0f, 5.0f, 4.9f, 0.0f}, 2000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_GT(h[1], 0);
  EXPECT_GT(h[2], 0);
}

TEST(Sampler, TopPCutsTheTail) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;
  // Probabilities ~0.84, 0.11, 0.04: the first alone covers 0.5.
  auto h = histogram(p, {3.0f, 1.0f, 0.0f}, 500);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0], 500);
}

TEST(Sampler, MinPDropsTokensBelowTheFractionOfTheBest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;
  // p1/p0 = e^-1 = 0.37 kept, p2/p0 = e^-3 = 0.05 dropped.
  auto h = histogram(p, {3.0f, 2.0f, 0.0f}, 3000);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_GT(h[1], 0);
}

TEST(Sampler, TemperatureMatchesSoftmaxFrequencies) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  const int n = 20000;
  auto h = histogram(p, {std::log(3.0f), 0.0f}, n);  // probabilities 0.75 / 0.25
  EXPECT_NEAR(h[0] / static_cast<double>(n), 0.75, 0.02);
}

TEST(Sampler, SameSeedSameSequenceOtherSeedDiffers) {
  SamplingParams p;
  p.temperature = 1.0f;
  std::vector<float> logits(100, 0.0f);
  auto draw = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p, 100);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(logits, {}));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, InvalidParametersNameTheField) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_EQ(p.validate(), "top_p: must be in (0, 1]");
  EXPECT_THROW(Sampler(p, 10), std::invalid_argument);
  p = {};
  p.temperature = -1.0f;
  EXPECT_EQ(p.validate(), "temperature: must be in [0, 100]");
  p = {};
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(p.validate().empty());
}

}  // namespace
}  // namespace vigil
