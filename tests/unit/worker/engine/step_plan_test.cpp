// plan_step on hand-made queues (no model): decodes first, prompts filled to what the latency
// target leaves (never a step short of its budget while a prompt waits), the auto target on the
// running batch's decode step, its ceiling and floor, and a budget that follows the learned cost
// when the machine slows.
#include "engine/step_plan.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

namespace vigil {
namespace {

constexpr double kMs = 1e-3;

// A cost model that has seen decode-only steps of `decode_ms` (any batch size: a flat line) and
// prompt chunks of every size class at `token_ms` a token beside one decode.
StepCostModel learned(double decode_ms, double token_ms) {
  StepCostModel m;
  for (int i = 0; i < 50; ++i) m.observe({1 + i % 8, 0}, decode_ms * kMs);
  for (int chunk : StepCostModel::kChunkClassStart) m.observe({1, chunk}, (decode_ms + chunk * token_ms) * kMs);
  return m;
}

PlanCandidate decode() { return {1, true}; }
PlanCandidate prompt(int pending) { return {pending, false}; }

TEST(StepPlan, DecodesFirstThenPromptsInPolicyOrderFilledToTheBudget) {
  // Target off: the budget is max_batched_tokens; prompts take it in queue order, a short one
  // leaving the rest to the next.
  const std::vector<PlanCandidate> q{prompt(10), decode(), prompt(100), decode(), prompt(5)};
  const StepPlan p = plan_step(q, {.max_tokens = 64, .max_prefill_chunk = 0, .target = {}},
                               StepCostModel{});
  EXPECT_EQ(p.tokens, (std::vector<int>{10, 1, 52, 1, 0}));
  EXPECT_EQ(p.decode_tokens, 2);
  EXPECT_EQ(p.prefill_tokens, 62);
  EXPECT_EQ(p.prefill_budget, 62);
  EXPECT_EQ(p.target_seconds, 0.0);
}

TEST(StepPlan, TheAutoTargetSizesPromptsToFiveDecodeSteps) {
  // Decode steps of 10 ms, prompt tokens of 1 ms: five decode steps leave 40 ms, 40 tokens.
  const StepCostModel cost = learned(10, 1);
  const std::vector<PlanCandidate> q{decode(), decode(), decode(), prompt(30), prompt(300)};
  const StepPlan p = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 0, .target = StepLatencyTarget::automatic()}, cost);
  EXPECT_NEAR(p.target_seconds, 50 * kMs, 1e-9);
  EXPECT_EQ(p.prefill_budget, 40);
  EXPECT_EQ(p.tokens, (std::vector<int>{1, 1, 1, 30, 10}));
  EXPECT_NEAR(cost.predict(p.shape()), p.target_seconds, 1e-9);
}

TEST(StepPlan, TheTargetIsFiveDecodeStepsOfTheWholeRunningBatch) {
  // Decode steps of 5 ms + 1 ms a sequence. Two sequences decode and six are still in prefill:
  // the streams will soon step with eight decodes, so the target is five of those steps, not of
  // two; the prompt gets what that leaves beside the two decodes of this step.
  StepCostModel cost;
  for (int i = 0; i < 400; ++i) cost.observe({1 + i % 16, 0}, (5 + 1 + i % 16) * kMs);
  for (int chunk : StepCostModel::kChunkClassStart) cost.observe({1, chunk}, cost.decode_seconds(1, 0) + chunk * kMs);
  EXPECT_NEAR(cost.decode_seconds(8, 0), 13 * kMs, 0.5 * kMs);
  std::vector<PlanCandidate> q{decode(), decode()};
  for (int i = 0; i < 6; ++i) q.push_back(prompt(300));
  const StepPlan p = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 0, .target = StepLatencyTarget::automatic()}, cost);
  EXPECT_DOUBLE_EQ(p.target_seconds, 5 * cost.decode_seconds(8, 0));
  const int expected = static_cast<int>((p.target_seconds - cost.decode_seconds(2, 0)) / kMs + 1e-9);
  EXPECT_EQ(p.prefill_budget, expected);
  EXPECT_GT(p.prefill_budget, 50);  // five two-decode steps (~35 ms) would leave ~28 tokens
  EXPECT_EQ(p.prefill_tokens, p.prefill_budget);
}

TEST(StepPlan, ChunksArePricedAtTheirOwnPositions) {
  // Decodes 10 ms, a prompt token 1 ms, a cached K/V row 2 us (taught by decode-only steps at two
  // depths). Beside one decode at position 10 (40 ms of room under 50 ms), a prompt at its start
  // fits 38 tokens; one 1,000 positions deep reads ~1,000 rows a token, 2 ms more each: 13. When
  // the deep one has only 5 tokens left, the next prompt in line gets the rest of the room.
  StepCostModel cost;
  for (int i = 0; i < 50; ++i)
    for (int rows : {11, 1011}) cost.observe({1, 0, rows, 0}, (10 + 0.002 * rows) * kMs);
  for (int chunk : StepCostModel::kChunkClassStart)
    cost.observe({1, chunk, 11, 0}, cost.decode_seconds(1, 11) + chunk * kMs);
  EXPECT_NEAR(cost.kv_row_seconds(), 2e-6, 1e-7);
  const StepRules rules{.max_tokens = 256, .max_prefill_chunk = 0,
                        .target = StepLatencyTarget::duration(std::chrono::milliseconds(50))};
  const StepPlan shallow = plan_step(std::vector<PlanCandidate>{{1, true, 10}, {300, false, 0}}, rules, cost);
  const StepPlan deep = plan_step(std::vector<PlanCandidate>{{1, true, 10}, {300, false, 1000}}, rules, cost);
  const StepPlan rest = plan_step(std::vector<PlanCandidate>{{1, true, 10}, {5, false, 1000}, {300, false, 0}}, rules, cost);
  EXPECT_EQ(shallow.tokens[1], 38);
  EXPECT_EQ(deep.tokens[1], 13);
  EXPECT_EQ(rest.tokens[1], 5);
  EXPECT_EQ(rest.tokens[2], 24);
  for (const StepPlan* p : {&shallow, &deep, &rest}) EXPECT_LE(cost.predict(p->shape()), 0.050 + 1e-9);
}

TEST(StepPlan, TheAutoTargetIsNeverMoreThan100Ms) {
  // Decode steps of 30 ms: five are 150 ms, capped at 100: 70 ms of prompt at 1 ms a token.
  const std::vector<PlanCandidate> q{decode(), prompt(500)};
  const StepPlan p = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 0, .target = StepLatencyTarget::automatic()}, learned(30, 1));
  EXPECT_NEAR(p.target_seconds, 100 * kMs, 1e-9);
  EXPECT_EQ(p.tokens, (std::vector<int>{1, 70}));
  // An explicit multiple is what was asked for, uncapped.
  const StepPlan m = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 0, .target = StepLatencyTarget::multiple(5)},
                               learned(30, 1));
  EXPECT_NEAR(m.target_seconds, 150 * kMs, 1e-9);
  EXPECT_EQ(m.tokens, (std::vector<int>{1, 120}));
}

TEST(StepPlan, PromptsAdvanceEvenWhenNoStepCanMeetTheTarget) {
  // A decode step alone is over a 5 ms target: one prompt token a step, never none.
  const std::vector<PlanCandidate> q{decode(), prompt(50), prompt(50)};
  const StepPlan p = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 0,
                                   .target = StepLatencyTarget::duration(std::chrono::milliseconds(5))},
                               learned(10, 1));
  EXPECT_EQ(p.tokens, (std::vector<int>{1, 1, 0}));
}

TEST(StepPlan, WithoutDecodesPromptsTakeEveryToken) {
  // Nothing streams: no target applies, prefill runs at max_batched_tokens.
  const std::vector<PlanCandidate> q{prompt(200), prompt(200)};
  const StepPlan p = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 0, .target = StepLatencyTarget::automatic()}, learned(10, 1));
  EXPECT_EQ(p.tokens, (std::vector<int>{200, 56}));
  EXPECT_EQ(p.target_seconds, 0.0);
}

TEST(StepPlan, APerRequestChunkCapPassesTheRestToTheNextPrompt) {
  const std::vector<PlanCandidate> q{decode(), prompt(100), prompt(100), prompt(3)};
  const StepPlan p = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 16, .target = StepLatencyTarget::automatic()}, learned(10, 1));
  EXPECT_EQ(p.prefill_budget, 40);
  EXPECT_EQ(p.tokens, (std::vector<int>{1, 16, 16, 3}));
}

TEST(StepPlan, DecodesBeyondTheTokenBudgetWaitInPolicyOrder) {
  const std::vector<PlanCandidate> q{decode(), prompt(10), decode(), decode()};
  const StepPlan p = plan_step(q, {.max_tokens = 2, .max_prefill_chunk = 0, .target = StepLatencyTarget::automatic()}, learned(10, 1));
  EXPECT_EQ(p.tokens, (std::vector<int>{1, 0, 1, 0}));
}

TEST(StepPlan, TheBudgetFollowsTheMachineWhenItSlowsDown) {
  // Another process takes half the cores: decode steps go from 10 to 20 ms, prompt tokens from 1
  // to 2 ms. The learned model follows within a few hundred steps and so does the budget: the
  // target doubles and the chunk stays what fits in it.
  StepCostModel cost = learned(10, 1);
  const std::vector<PlanCandidate> q{decode(), decode(), prompt(500)};
  const StepRules rules{.max_tokens = 256, .max_prefill_chunk = 0, .target = StepLatencyTarget::automatic()};
  EXPECT_EQ(plan_step(q, rules, cost).prefill_budget, 40);
  for (int i = 0; i < 300; ++i) {
    cost.observe({2, 0}, 20 * kMs);
    for (int chunk : StepCostModel::kChunkClassStart) cost.observe({2, chunk}, (20 + 2.0 * chunk) * kMs);
  }
  const StepPlan slow = plan_step(q, rules, cost);
  EXPECT_NEAR(slow.target_seconds, 100 * kMs, 1 * kMs);
  EXPECT_NEAR(slow.prefill_budget, 40, 1);
}

TEST(StepPlan, PromptsAreSizedSoThatTheTargetHoldsWithTheLearnedOverrun) {
  // Steps of 16 prompt tokens beside decodes took 26 to 52 ms (a noisy neighbour): the model
  // learns their mean, 39 ms, and that the worst of them run ~12 ms over it; the plan leaves that
  // headroom, so a step that overruns as the worst did still ends within the target.
  StepCostModel cost = learned(10, 1);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(1.0, 2.0);
  for (int i = 0; i < 3000; ++i) {
    cost.observe({3, 16}, 26 * kMs * noise(rng));
    cost.observe({3, 0}, 10 * kMs);
  }
  ASSERT_GT(cost.overrun_seconds(), 10 * kMs);
  const std::vector<PlanCandidate> q{decode(), decode(), decode(), prompt(500)};
  const StepPlan p = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 0, .target = StepLatencyTarget::automatic()}, cost);
  EXPECT_LE(cost.predict(p.shape()) + cost.overrun_seconds(), p.target_seconds + 1e-9);
  // The mean prediction alone would have allowed more.
  EXPECT_LT(p.prefill_tokens, cost.prompt_fit(p.target_seconds - cost.decode_seconds(3, 0), 0, 0, 0, 256));
}

TEST(StepPlan, PromptsKeepHalfTheTargetOnAMachineTooNoisyForIt) {
  // One step in ten ran 60 ms over its prediction, more than the 50 ms target: no margin could
  // cover it, and prompts still get what fits in half the target.
  StepCostModel cost = learned(10, 1);
  for (int i = 0; i < 3000; ++i) {
    cost.observe({3, 16}, (26 + (i % 10 ? 0 : 60)) * kMs);
    cost.observe({3, 0}, 10 * kMs);
  }
  ASSERT_GT(cost.overrun_seconds(), 50 * kMs);
  const std::vector<PlanCandidate> q{decode(), decode(), decode(), prompt(500)};
  const StepPlan p = plan_step(q, {.max_tokens = 256, .max_prefill_chunk = 0, .target = StepLatencyTarget::automatic()}, cost);
  EXPECT_NEAR(p.target_seconds, 50 * kMs, 1e-9);
  EXPECT_LE(cost.predict(p.shape()), p.target_seconds / 2 + 1e-9);
  EXPECT_GT(p.prefill_tokens, 1);
}

// The rules on random queues: decodes never skipped for prompts, the plan never over its budget,
// and a step short of its prompt budget only when no prompt token is left.
TEST(StepPlan, RandomQueuesKeepTheRules) {
  std::mt19937 rng(7);
  const StepCostModel cost = learned(10, 1);
  for (int round = 0; round < 2000; ++round) {
    std::vector<PlanCandidate> q;
    const int n = std::uniform_int_distribution<int>(0, 20)(rng);
    for (int i = 0; i < n; ++i)
      q.push_back(rng() % 2 ? decode() : prompt(std::uniform_int_distribution<int>(1, 600)(rng)));
    const StepRules rules{.max_tokens = std::uniform_int_distribution<int>(1, 300)(rng),
                          .max_prefill_chunk = static_cast<int>(rng() % 3) * 16,
                          .target = rng() % 2 ? StepLatencyTarget::automatic() : StepLatencyTarget{}};
    const StepPlan p = plan_step(q, rules, cost);
    ASSERT_EQ(p.tokens.size(), q.size());
    int decodes = 0, waiting_decodes = 0, prompt_left = 0, sum = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      sum += p.tokens[i];
      if (q[i].decoding) {
        ASSERT_LE(p.tokens[i], 1);
        decodes += p.tokens[i];
        waiting_decodes += 1 - p.tokens[i];
      } else {
        ASSERT_LE(p.tokens[i], q[i].pending);
        const int cap = rules.max_prefill_chunk > 0 ? std::min(q[i].pending, rules.max_prefill_chunk) : q[i].pending;
        prompt_left += cap - p.tokens[i];
      }
    }
    ASSERT_EQ(decodes, p.decode_tokens);
    ASSERT_EQ(sum, p.decode_tokens + p.prefill_tokens);
    ASSERT_LE(sum, rules.max_tokens);
    if (waiting_decodes > 0) {
      ASSERT_EQ(p.decode_tokens, rules.max_tokens) << "a decode skipped with budget left";
    }
    ASSERT_LE(p.prefill_tokens, p.prefill_budget);
    if (p.prefill_tokens < p.prefill_budget) {
      ASSERT_EQ(prompt_left, 0) << "budget left while a prompt waits";
    }
    if (p.decode_tokens > 0 && p.decode_tokens < rules.max_tokens && p.prefill_budget == 0)
      FAIL() << "a prompt could not advance beside decodes";
  }
}

}  // namespace
}  // namespace vigil
