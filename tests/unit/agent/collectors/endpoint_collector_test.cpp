// The endpoint's series rendered from hand-made counts: every status code and cut reason present
// from the first scrape at 0 (fixed label sets, so a rate() sees the first one), the counts as
// recorded, the housekeeping age from the liveness rule.
#include "collectors/endpoint_collector.h"

#include <gtest/gtest.h>

#include <string>

#include "rendered_families.h"

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

TEST(EndpointCollector, FixedLabelSetsFromTheFirstScrape) {
  HttpStats http;
  LoopLiveness liveness(10s, LoopLiveness::Clock::now());
  auto fs = EndpointCollector(http, liveness).Collect();
  const auto& answers = family(fs, "vigil_agent_http_requests_total");
  ASSERT_EQ(answers.metric.size(), kHttpStatusCodes.size());
  for (const auto& m : answers.metric) EXPECT_EQ(m.counter.value, 0) << label(m, "code");
  EXPECT_EQ(family(fs, "vigil_agent_http_rejected_total").metric.size(), kHttpRejections.size());
  EXPECT_EQ(family(fs, "vigil_agent_housekeeping_stall_limit_seconds").metric.at(0).gauge.value, 10);
}

TEST(EndpointCollector, CountsAsRecorded) {
  HttpStats http;
  http.opened();
  http.opened();
  http.closed();
  http.answered(408);
  http.answered(408);
  http.rejected(HttpRejection::kDeadline);
  LoopLiveness liveness(10s, LoopLiveness::Clock::now() - 3s);
  auto fs = EndpointCollector(http, liveness).Collect();
  EXPECT_EQ(family(fs, "vigil_agent_http_connections").metric.at(0).gauge.value, 1);
  for (const auto& m : family(fs, "vigil_agent_http_requests_total").metric)
    EXPECT_EQ(m.counter.value, label(m, "code") == "408" ? 2 : 0) << label(m, "code");
  for (const auto& m : family(fs, "vigil_agent_http_rejected_total").metric)
    EXPECT_EQ(m.counter.value, label(m, "reason") == rejection_name(HttpRejection::kDeadline) ? 1 : 0)
        << label(m, "reason");
  double age = family(fs, "vigil_agent_housekeeping_last_tick_age_seconds").metric.at(0).gauge.value;
  EXPECT_GE(age, 3);
  EXPECT_LT(age, 60);
}

}  // namespace
}  // namespace vigil::agent
