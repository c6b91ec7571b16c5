// plan_step: decodes first, then prompt chunks filled to what the latency target leaves.
#include "engine/step_plan.h"

#include <algorithm>

namespace vigil {

double step_target_seconds(const StepLatencyTarget& target, const StepCostModel& cost, int decode_tokens,
                           int64_t kv_rows) {
  if (target.fixed.count() > 0) return std::chrono::duration<double>(target.fixed).count();
  if (target.decode_multiple <= 0) return 0;
  const double seconds = target.decode_multiple * cost.decode_seconds(std::max(1, decode_tokens), kv_rows);
  if (target.ceiling.count() <= 0) return seconds;
  return std::min(seconds, std::chrono::duration<double>(target.ceiling).count());
}

StepPlan plan_step(std::span<const PlanCandidate> queue, const StepRules& rules, const StepCostModel& cost) {
  StepPlan plan;
  plan.tokens.assign(queue.size(), 0);
  int budget = rules.max_tokens;
  int64_t batch_rows = 0;  // the whole batch decoding at the end of what each holds now
  for (size_t i = 0; i < queue.size(); ++i) {
    batch_rows += queue[i].position + queue[i].pending;
    if (!queue[i].decoding || budget == 0) continue;
    plan.tokens[i] = 1;
    --budget;
    ++plan.decode_tokens;
    plan.decode_kv_rows += queue[i].position + 1;
  }
  const auto chunk_cap = [&](const PlanCandidate& c, int left) {
    const int n = std::min(c.pending, left);
    return rules.max_prefill_chunk > 0 ? std::min(n, rules.max_prefill_chunk) : n;
  };
  const bool timed = plan.decode_tokens > 0 && rules.target.on();
  double room = 0;
  if (timed) {
    // The decode step the streams will see is that of the whole running batch: the sequences
    // still in prefill decode beside them within a few steps. A target tied to the decodes of the
    // moment shrinks when the batch fills with prompts, and the smaller steps it allows pay the
    // step's fixed cost (every weight read once) more often: the prefill rate falls, more of the
    // batch waits in prefill, the target shrinks again.
    const int batch = std::max(plan.decode_tokens, static_cast<int>(queue.size()));
    plan.target_seconds = step_target_seconds(rules.target, cost, batch, batch_rows);
    // Planned so that the target holds for all but the worst steps, not for the average one; on a
    // machine too noisy for that, prompts keep half the target.
    const double margin = std::min(cost.overrun_seconds(), plan.target_seconds / 2);
    room = plan.target_seconds - margin - cost.decode_seconds(plan.decode_tokens, plan.decode_kv_rows);
  }
  const auto first_prompt = std::find_if(queue.begin(), queue.end(), [](const PlanCandidate& c) { return !c.decoding; });
  plan.prefill_budget =
      timed ? cost.prompt_fit(room, 0, 0, first_prompt == queue.end() ? 0 : first_prompt->position, budget) : budget;
  for (size_t i = 0; i < queue.size() && budget > 0; ++i) {
    if (queue[i].decoding) continue;
    const int most = chunk_cap(queue[i], budget);
    int n = timed ? cost.prompt_fit(room, plan.prefill_tokens, plan.prefill_kv_rows, queue[i].position, most) : most;
    if (timed && plan.prefill_tokens == 0) n = std::max(n, std::min(most, 1));  // prompts always advance
    plan.tokens[i] = n;
    budget -= n;
    plan.prefill_tokens += n;
    plan.prefill_kv_rows += prompt_kv_rows(queue[i].position, n);
  }
  plan.prefill_budget = std::max(plan.prefill_budget, plan.prefill_tokens);
  return plan;
}

}  // namespace vigil
