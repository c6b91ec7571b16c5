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

TEST(SchedulerPolicy, TokenBudgetAgingLetsLongWaitersThrough) {
  // A 900-token request that waited 10 s against fresh 20-token ones.
  const std::vector<SchedulingKey> keys = {{1, 0, 900, 10.0}, {2, 0, 20, 0.0}, {3, 0, 20, 0.0}};
  auto sorted = [&](double aging) {
    auto policy = make_policy(PolicyKind::kTokenBudget, aging);
    std::vector<SchedulingKey> k = keys;
    std::sort(k.begin(), k.end(), [&](const auto& a, const auto& b) { return policy->before(a, b); });
    std::vector<uint64_t> ids;
    for (const auto& x : k) ids.push_back(x.arrival);
    return ids;
  };
  EXPECT_EQ(sorted(0), (std::vector<uint64_t>{2, 3, 1}));    // no aging: starves behind short ones
  EXPECT_EQ(sorted(50), (std::vector<uint64_t>{2, 3, 1}));   // 900 - 500 = 400 > 20
  EXPECT_EQ(sorted(100), (std::vector<uint64_t>{1, 2, 3}));  // 900 - 1000 < 20: its turn
  // Equal cost: arrival decides, so the order stays strict.
  auto policy = make_policy(PolicyKind::kTokenBudget, 10);
  EXPECT_TRUE(policy->before({1, 0, 30, 1.0}, {2, 0, 20, 0.0}));
  EXPECT_FALSE(policy->before({2, 0, 20, 0.0}, {1, 0, 30, 1.0}));
}

// No starvation, as a bound: a request with R tokens of work left that has waited R / aging
// seconds is served before any newcomer, however short, so at most the requests already ahead of
// it at that moment (each holding a slot for a bounded time) can still go first.
TEST(SchedulerPolicy, TokenBudgetServesAnyWaiterWithinItsWorkOverTheAgingRate) {
  for (double aging : {50.0, 200.0, 1000.0})
    for (int remaining : {1, 20, 672, 2048}) {
      auto policy = make_policy(PolicyKind::kTokenBudget, aging);
      const double bound = remaining / aging;
      const SchedulingKey waiter{1, 0, remaining, bound};
      for (int newcomer : {1, 2, 16, 512})
        EXPECT_TRUE(policy->before(waiter, {2, 0, newcomer, 0.0}))
            << "aging " << aging << ", " << remaining << " tokens after " << bound << " s vs " << newcomer;
      // Just before the bound a one-token newcomer can still go first (the bound is tight).
      if (remaining > 2) {
        EXPECT_TRUE(policy->before({2, 0, 1, 0.0}, {1, 0, remaining, bound * 0.5}));
      }
    }
}

TEST(SchedulerPolicy, NamesRoundTrip) {
  for (PolicyKind k : {PolicyKind::kFcfs, PolicyKind::kPriority, PolicyKind::kTokenBudget})
    EXPECT_EQ(parse_policy(policy_name(k)), k);
  EXPECT_EQ(parse_policy("lifo"), std::nullopt);
}

}  // namespace
}  // namespace vigil
