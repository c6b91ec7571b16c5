// Scheduling policies: each orders requests by its own rule and breaks ties by arrival.
#include "engine/scheduler_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace vigil {
namespace {

std::vector<uint64_t> order(PolicyKind kind, std::vector<SchedulingKey> keys) {
  auto policy = make_policy(kind);
  std::sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) { return policy->before(a, b); });
  std::vector<uint64_t> ids;
  for (const auto& k : keys) ids.push_back(k.arrival);
  return ids;
}

// arrival, priority, remaining tokens
const std::vector<SchedulingKey> kKeys = {{1, 5, 300}, {2, 0, 900}, {3, 5, 20}, {4, 0, 20}, {5, -1, 500}};

TEST(SchedulerPolicy, FcfsIsArrivalOrder) {
  EXPECT_EQ(order(PolicyKind::kFcfs, kKeys), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
}

TEST(SchedulerPolicy, PriorityLowerFirstTiesByArrival) {
  EXPECT_EQ(order(PolicyKind::kPriority, kKeys), (std::vector<uint64_t>{5, 2, 4, 1, 3}));
}

TEST(SchedulerPolicy, TokenBudgetSmallestRemainingFirstTiesByArrival) {
  EXPECT_EQ(order(PolicyKind::kTokenBudget, kKeys), (std::vector<uint64_t>{3, 4, 1, 5, 2}));
}

TEST(SchedulerPolicy, NamesRoundTrip) {
  for (PolicyKind k : {PolicyKind::kFcfs, PolicyKind::kPriority, PolicyKind::kTokenBudget})
    EXPECT_EQ(parse_policy(policy_name(k)), k);
  EXPECT_EQ(parse_policy("lifo"), std::nullopt);
}

}  // namespace
}  // namespace vigil
