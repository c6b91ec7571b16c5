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
// Pure shortest-first starves long requests at overload (their P99 wait grows without bound), so
// waiting earns credit: `aging` tokens of remaining work forgiven per second waited.
class TokenBudgetPolicy final : public SchedulerPolicy {
 public:
  explicit TokenBudgetPolicy(double aging) : aging_(aging) {}
  bool before(const SchedulingKey& a, const SchedulingKey& b) const override {
    const double ca = cost(a), cb = cost(b);
    return ca != cb ? ca < cb : a.arrival < b.arrival;
  }

 private:
  double cost(const SchedulingKey& k) const { return k.remaining_tokens - aging_ * k.waited_seconds; }
  double aging_;
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

std::unique_ptr<SchedulerPolicy> make_policy(PolicyKind kind, double aging_tokens_per_second) {
  switch (kind) {
    case PolicyKind::kFcfs: return std::make_unique<FcfsPolicy>();
    case PolicyKind::kPriority: return std::make_unique<PriorityPolicy>();
    case PolicyKind::kTokenBudget: return std::make_unique<TokenBudgetPolicy>(aging_tokens_per_second);
  }
  return std::make_unique<FcfsPolicy>();
}

}  // namespace vigil
