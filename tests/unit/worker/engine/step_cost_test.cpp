// StepCostModel on steps of known cost: the decode line and the prompt-token cost it learns, the
// chunk it allows, and how it follows a change of speed.
#include "engine/step_cost.h"

#include <gtest/gtest.h>

namespace vigil {
namespace {

// A backend whose steps cost `fixed` + `per_decode` a decode token + `per_prompt` a prompt token.
struct Costs {
  double fixed, per_decode, per_prompt;
  double step(int decodes, int prompt) const { return fixed + per_decode * decodes + per_prompt * prompt; }
};

void run_steps(StepCostModel& m, const Costs& c, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (int d = 1; d <= 16; ++d) {
      m.observe(d, 0, c.step(d, 0));
      m.observe(d, 32 + 8 * (d % 4), c.step(d, 32 + 8 * (d % 4)));
    }
}

TEST(StepCostModel, LearnsTheDecodeLineAndThePromptTokenCost) {
  const Costs c{0.005, 0.0005, 0.0002};
  StepCostModel m;
  m.seed(c.step(1, 0), 64, c.step(0, 64) + c.fixed * 0);  // a calibration as the engine runs it
  run_steps(m, c, 10);
  EXPECT_NEAR(m.decode_seconds(8), c.step(8, 0), 1e-4);
  EXPECT_NEAR(m.decode_seconds(1), c.step(1, 0), 2e-4);
  EXPECT_NEAR(m.prefill_token_seconds(), c.per_prompt, 2e-5);
  EXPECT_NEAR(m.predict(4, 100), c.step(4, 100), 5e-4);
}

TEST(StepCostModel, ThePromptChunkFillsWhatTheTargetLeaves) {
  const Costs c{0.005, 0.0005, 0.0002};
  StepCostModel m;
  m.seed(c.step(1, 0), 64, c.step(1, 63));
  run_steps(m, c, 10);
  // 20 ms - (5 + 4 x 0.5) ms leaves 13 ms: 65 prompt tokens of 0.2 ms.
  EXPECT_NEAR(m.prefill_budget(4, 0.020, 256), 65, 2);
  EXPECT_EQ(m.prefill_budget(4, 1.0, 256), 256);  // capped by the step's token budget
  EXPECT_EQ(m.prefill_budget(16, 0.010, 256), 0);  // 13 ms of decodes alone: nothing fits
}

TEST(StepCostModel, FollowsTheMachineWhenItSlowsDown) {
  StepCostModel m;
  const Costs fast{0.005, 0.0005, 0.0002}, slow{0.010, 0.001, 0.0004};
  m.seed(fast.step(1, 0), 64, fast.step(1, 63));
  run_steps(m, fast, 10);
  run_steps(m, slow, 10);  // 320 steps at the new speed
  EXPECT_NEAR(m.decode_seconds(8), slow.step(8, 0), 5e-4);
  EXPECT_NEAR(m.prefill_token_seconds(), slow.per_prompt, 4e-5);
}

TEST(StepCostModel, WithoutCalibrationItAllowsTheWholeBudget) {
  StepCostModel m;
  EXPECT_EQ(m.prefill_budget(4, 0.020, 256), 256);
}

}  // namespace
}  // namespace vigil
