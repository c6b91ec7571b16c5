// The agent's count of its own series and of their churn between renders.
#include "stats/series_account.h"

#include <gtest/gtest.h>

#include <limits>

namespace vigil::agent {
namespace {

prometheus::MetricFamily gauge(const std::string& name, std::vector<std::string> pids) {
  prometheus::MetricFamily f{name, "help", prometheus::MetricType::Gauge, {}};
  for (const auto& pid : pids) {
    prometheus::ClientMetric m;
    m.label = {{"pid", pid}, {"comm", "python"}};
    f.metric.push_back(m);
  }
  return f;
}

double value(const std::vector<prometheus::MetricFamily>& fs, const std::string& name) {
  for (const auto& f : fs)
    if (f.name == name) return f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value : f.metric[0].gauge.value;
  ADD_FAILURE() << name << " not exported";
  return -1;
}

TEST(SeriesAccount, CountsSeriesAndChurnBetweenRenders) {
  SeriesAccount a;
  prometheus::MetricFamily h{"sizes", "help", prometheus::MetricType::Histogram, {}};
  prometheus::ClientMetric hm;
  hm.label = {{"pid", "1"}};
  hm.histogram.bucket = {{0, 4096.0}, {0, 65536.0}};
  h.metric.push_back(hm);
  a.observe({gauge("a", {"1", "2", "3"}), h});
  // 3 gauges + a histogram's 2 buckets, +Inf, _sum and _count; the first render creates nothing.
  EXPECT_EQ(value(a.families(), "vigil_agent_series"), 8);
  EXPECT_EQ(value(a.families(), "vigil_agent_series_created_total"), 0);
  a.observe({gauge("a", {"2", "3", "4", "5"}), h});  // pid 1 gone, 4 and 5 new
  EXPECT_EQ(value(a.families(), "vigil_agent_series"), 9);
  EXPECT_EQ(value(a.families(), "vigil_agent_series_created_total"), 2);
  EXPECT_EQ(value(a.families(), "vigil_agent_series_removed_total"), 1);
  a.observe({gauge("a", {"2", "3", "4", "5"}), h});  // no change
  EXPECT_EQ(value(a.families(), "vigil_agent_series_created_total"), 2);
  EXPECT_EQ(value(a.families(), "vigil_agent_series_removed_total"), 1);
  a.observe({gauge("b", {"2"})});  // another family, same labels: a different series
  EXPECT_EQ(value(a.families(), "vigil_agent_series"), 1);
  EXPECT_EQ(value(a.families(), "vigil_agent_series_created_total"), 3);
  EXPECT_EQ(value(a.families(), "vigil_agent_series_removed_total"), 10);
}

TEST(SeriesAccount, HistogramEndingAtInfHasOneInfBucket) {
  // As the agent's collectors build them (metric_builder.h): the last bound is +Inf, and the text
  // serializer writes no second +Inf line for it.
  SeriesAccount a;
  prometheus::MetricFamily h{"sizes", "help", prometheus::MetricType::Histogram, {}};
  prometheus::ClientMetric hm;
  hm.histogram.bucket = {{0, 4096.0}, {0, std::numeric_limits<double>::infinity()}};
  h.metric.push_back(hm);
  a.observe({h});
  EXPECT_EQ(value(a.families(), "vigil_agent_series"), 4);  // 2 buckets, _sum, _count
}

}  // namespace
}  // namespace vigil::agent
