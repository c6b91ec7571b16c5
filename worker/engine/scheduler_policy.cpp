// Scheduling policies: the order in which waiting requests are admitted (and, reversed, preempted).
#include "engine/scheduler_policy.h"

#include <tuple>

namespace vigil {
namespace {

// First come, first served.
class FcfsPolicy final : public SchedulerPolicy {
 public:
  bool before(const SchedulingKey& a, const SchedulingKey& b) const override { return a.arrival < b.arrival; }
};

// vLLM's priority scheduling: lower `priority` first, ties by arrival.
class PriorityPolicy final : public SchedulerPolicy {
 public:
  bool before(const SchedulingKey& a, const SchedulingKey& b) const override {
    return std::tie(a.priority, a.arrival) < std::tie(b.priority, b.arrival);
  }
};

// The source document's 2.1: the request with the smallest remaining token budget first, so short
// requests are not stuck behind long ones (shortest-remaining-work first); ties by arrival.
class TokenBudgetPolicy final : public SchedulerPolicy {
 public:
  bool before(const SchedulingKey& a, const SchedulingKey& b) const override {
    return std::tie(a.remaining_tokens, a.arrival) < std::tie(b.remaining_tokens, b.arrival);
  }
};

}  // namespace

std::string_view policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kFcfs: return "fcfs";
    case PolicyKind::kPriority: return "priority";
    case PolicyKind::kTokenBudget: return "token_budget";
  }
  return "unknown";
}

std::optional<PolicyKind> parse_policy(std::string_view name) {
  for (PolicyKind k : {PolicyKind::kFcfs, PolicyKind::kPriority, PolicyKind::kTokenBudget})
    if (policy_name(k) == name) return k;
  return std::nullopt;
}

std::unique_ptr<SchedulerPolicy> make_policy(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kFcfs: return std::make_unique<FcfsPolicy>();
    case PolicyKind::kPriority: return std::make_unique<PriorityPolicy>();
    case PolicyKind::kTokenBudget: return std::make_unique<TokenBudgetPolicy>();
  }
  return std::make_unique<FcfsPolicy>();
}

}  // namespace vigil
