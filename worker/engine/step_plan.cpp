// plan_step: decodes first, then prompt chunks filled to what the latency target leaves.
#include "engine/step_plan.h"

#include <algorithm>

namespace vigil {

double step_target_seconds(const StepLatencyTarget& target, const StepCostModel& cost, int decode_tokens) {
  if (target.fixed.count() > 0) return std::chrono::duration<double>(target.fixed).count();
  if (target.decode_multiple <= 0) return 0;
  const double seconds = target.decode_multiple * cost.decode_seconds(std::max(1, decode_tokens));
  if (target.ceiling.count() <= 0) return seconds;
  return std::min(seconds, std::chrono::duration<double>(target.ceiling).count());
}

StepPlan plan_step(std::span<const PlanCandidate> queue, const StepRules& rules, const StepCostModel& cost) {
  StepPlan plan;
  plan.tokens.assign(queue.size(), 0);
  int budget = rules.max_tokens;
  for (size_t i = 0; i < queue.size() && budget > 0; ++i)
    if (queue[i].decoding) {
      plan.tokens[i] = 1;
      --budget;
      ++plan.decode_tokens;
    }
  if (plan.decode_tokens > 0 && rules.target.on()) {
    // The decode step the streams will see is that of the whole running batch: the sequences
    // still in prefill decode beside them within a few steps. A target tied to the decodes of the
    // moment shrinks when the batch fills with prompts, and the smaller steps it allows pay the
    // step's fixed cost (every weight read once) more often: the prefill rate falls, more of the
    // batch waits in prefill, the target shrinks again.
    const int batch = std::max(plan.decode_tokens, static_cast<int>(queue.size()));
    plan.target_seconds = step_target_seconds(rules.target, cost, batch);
    budget = std::max(std::min(budget, 1), cost.prefill_budget(plan.decode_tokens, plan.target_seconds, budget));
  }
  plan.prefill_budget = budget;
  for (size_t i = 0; i < queue.size() && budget > 0; ++i) {
    if (queue[i].decoding) continue;
    int n = std::min(queue[i].pending, budget);
    if (rules.max_prefill_chunk > 0) n = std::min(n, rules.max_prefill_chunk);
    plan.tokens[i] = n;
    budget -= n;
    plan.prefill_tokens += n;
  }
  return plan;
}

}  // namespace vigil
