// Scheduling policies: the order in which waiting requests are admitted (and, reversed, preempted).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace vigil {

enum class PolicyKind { kFcfs, kPriority, kTokenBudget };
std::string_view policy_name(PolicyKind kind);                 // "fcfs", "priority", "token_budget"
std::optional<PolicyKind> parse_policy(std::string_view name);  // nullopt for unknown names

// What a policy may look at to order two requests.
struct SchedulingKey {
  uint64_t arrival = 0;        // submission order, unique
  int priority = 0;            // request field; lower first
  int remaining_tokens = 0;    // prompt tokens still to prefill + tokens still to generate
  double waited_seconds = 0;   // since submission, at the moment the keys are compared
};

class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;
  // True when `a` should be served before `b`. A strict weak order; ties broken by arrival.
  virtual bool before(const SchedulingKey& a, const SchedulingKey& b) const = 0;
};

// `aging_tokens_per_second` (token_budget only): each second a request has waited counts as that
// many tokens less remaining work, so long requests cannot starve behind a stream of short ones.
std::unique_ptr<SchedulerPolicy> make_policy(PolicyKind kind, double aging_tokens_per_second = 0);

}  // namespace vigil
