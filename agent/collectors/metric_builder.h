// Small helpers that build prometheus-cpp MetricFamily values for collectors read at scrape time.
#pragma once

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vigil::agent {

using LabelList = std::vector<std::pair<std::string, std::string>>;

inline prometheus::MetricFamily make_family(std::string name, std::string help,
                                            prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

inline prometheus::ClientMetric& add_metric(prometheus::MetricFamily& f, const LabelList& labels) {
  prometheus::ClientMetric m;
  for (const auto& [k, v] : labels) m.label.push_back({k, v});
  f.metric.push_back(std::move(m));
  return f.metric.back();
}

// Adds a counter or gauge sample, whichever the family is.
inline void add_sample(prometheus::MetricFamily& f, const LabelList& labels, double value) {
  auto& m = add_metric(f, labels);
  if (f.type == prometheus::MetricType::Counter) m.counter.value = value;
  else m.gauge.value = value;
}

// Adds a histogram from per-bucket (non-cumulative) counts with the given upper bounds; the
// last bound should be +Inf.
inline void add_histogram(prometheus::MetricFamily& f, const LabelList& labels,
                          const std::vector<double>& bounds, const std::vector<uint64_t>& counts,
                          double sum) {
  auto& m = add_metric(f, labels);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size() && i < counts.size(); ++i) {
    cumulative += counts[i];
    m.histogram.bucket.push_back({cumulative, bounds[i]});
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = sum;
}

}  // namespace vigil::agent
