// The step plan: which running sequences one forward pass computes and how many tokens of each,
// from the policy's order, the token budget and the step latency target (stall-free batching:
// Sarathi-Serve, Agrawal et al., OSDI 2024). The engine finds KV blocks for it; nothing here
// touches a sequence.
#pragma once

#include <chrono>
#include <span>
#include <vector>

#include "engine/step_cost.h"

namespace vigil {

// engine.step_latency_target: while streams decode, how long a step that also carries prompt
// tokens may take. A multiple of what a decode-only step of the running batch costs (learned, so it
// means the same on every machine), optionally capped; a fixed duration; or off (this struct's
// value-initialised state; `serve` defaults to automatic(): docs/decisions.md).
struct StepLatencyTarget {
  // "auto": Sarathi-Serve's strict SLO (P99 time between tokens within 5 decode iterations),
  // never more than 100 ms, the gap a reader of a stream starts to notice.
  static constexpr double kAutoMultiple = 5.0;
  static constexpr std::chrono::milliseconds kAutoCeiling{100};
  std::chrono::milliseconds fixed{0};        // > 0: this long
  double decode_multiple = 0;                // > 1: this many decode-only steps of the batch
  std::chrono::milliseconds ceiling{0};      // with a multiple and > 0: at most this long
  bool on() const { return fixed.count() > 0 || decode_multiple > 0; }
  static StepLatencyTarget automatic();          // "auto"
  static StepLatencyTarget multiple(double m);   // uncapped
  static StepLatencyTarget duration(std::chrono::milliseconds d);
};

inline StepLatencyTarget StepLatencyTarget::automatic() {
  StepLatencyTarget t = multiple(kAutoMultiple);
  t.ceiling = kAutoCeiling;
  return t;
}
inline StepLatencyTarget StepLatencyTarget::multiple(double m) {
  StepLatencyTarget t;
  t.decode_multiple = m;
  return t;
}
inline StepLatencyTarget StepLatencyTarget::duration(std::chrono::milliseconds d) {
  StepLatencyTarget t;
  t.fixed = d;
  return t;
}

// How long a step may take under `target` when the batch it is a multiple of decodes
// `decode_tokens` tokens reading `kv_rows` K/V rows, by the cost model; 0: off.
double step_target_seconds(const StepLatencyTarget& target, const StepCostModel& cost, int decode_tokens,
                           int64_t kv_rows);

// One running sequence as the planner sees it, in policy order.
struct PlanCandidate {
  int pending = 0;        // positions not yet computed (a decoding sequence: 1)
  bool decoding = false;  // its next position computes a generated token
  int position = 0;       // its next position (positions before it are cached)
};

struct StepRules {
  int max_tokens = 256;        // engine.max_batched_tokens
  int max_prefill_chunk = 0;   // engine.max_prefill_chunk; 0: none
  StepLatencyTarget target;
};

struct StepPlan {
  std::vector<int> tokens;   // per candidate: the positions this step computes; 0: not in it
  int decode_tokens = 0;
  int prefill_tokens = 0;
  int64_t decode_kv_rows = 0;   // K/V rows the step's decodes read
  int64_t prefill_kv_rows = 0;  // ... and its prompt tokens
  StepShape shape() const { return {decode_tokens, prefill_tokens, decode_kv_rows, prefill_kv_rows}; }
  int prefill_budget = 0;      // the most prompt tokens the step could take (at the first prompt's positions)
  double target_seconds = 0;   // the latency target it was planned for; 0: off, or no decodes
};

// The rules, in order:
//  1. every decoding sequence gets its one token, in policy order, while max_tokens lasts;
//  2. with decodes in the step and the target on, prompts get, in policy order, what the cost model
//     predicts fits the target less its learned overrun (so that it holds for all but the worst
//     1 - kOverrunQuantile of steps; at most half the target) beside them, each priced at its own positions (a chunk deep in a
//     long prompt reads more K/V rows), at least one token (prompts always advance); a multiple
//     applies to the decode step of the whole running batch (every sequence decoding at the end of
//     what it holds now); without decodes, or with the target off, prompts take, in policy order,
//     everything max_tokens leaves;
//  3. each prompt takes at most max_prefill_chunk; what one cannot use goes to the next: never a
//     step short of its budget while a prompt waits.
StepPlan plan_step(std::span<const PlanCandidate> queue, const StepRules& rules, const StepCostModel& cost);

}  // namespace vigil
