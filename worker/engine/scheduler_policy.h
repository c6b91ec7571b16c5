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
};

class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;
  // True when `a` should be served before `b`. A strict weak order; ties broken by arrival.
  virtual bool before(const SchedulingKey& a, const SchedulingKey& b) const = 0;
};

std::unique_ptr<SchedulerPolicy> make_policy(PolicyKind kind);

}  // namespace vigil
