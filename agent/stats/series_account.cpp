#include "stats/series_account.h"

#include <cmath>
#include <functional>
#include <string>

namespace vigil::agent {
namespace {

uint64_t series_key(const std::string& name, const std::vector<prometheus::ClientMetric::Label>& labels,
                    const char* extra_name = nullptr, const std::string& extra_value = {}) {
  std::string key = name;
  for (const auto& l : labels) {
    key += '\x1f';
    key += l.name;
    key += '=';
    key += l.value;
  }
  if (extra_name) {
    key += '\x1f';
    key += extra_name;
    key += '=';
    key += extra_value;
  }
  return std::hash<std::string>{}(key);
}

prometheus::MetricFamily family(const std::string& name, const std::string& help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily f{name, help, type, {}};
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) m.counter.value = value;
  else m.gauge.value = value;
  f.metric.push_back(m);
  return f;
}

}  // namespace

void SeriesAccount::observe(const std::vector<prometheus::MetricFamily>& families) {
  std::unordered_set<uint64_t> now;
  for (const auto& f : families) {
    for (const auto& m : f.metric) {
      if (f.type == prometheus::MetricType::Histogram) {
        bool last_inf = false;
        for (const auto& b : m.histogram.bucket) {
          last_inf = std::isinf(b.upper_bound);
          now.insert(series_key(f.name + "_bucket", m.label, "le", last_inf ? "+Inf" : std::to_string(b.upper_bound)));
        }
        // The text serializer adds a +Inf bucket only where the buckets lack one (the agent's own
        // histograms end with it): one series either way.
        if (!last_inf) now.insert(series_key(f.name + "_bucket", m.label, "le", "+Inf"));
        now.insert(series_key(f.name + "_sum", m.label));
        now.insert(series_key(f.name + "_count", m.label));
      } else {
        now.insert(series_key(f.name, m.label));
      }
    }
  }
  std::lock_guard lock(mu_);
  if (!first_) {
    for (uint64_t k : now) created_ += previous_.count(k) == 0;
    for (uint64_t k : previous_) removed_ += now.count(k) == 0;
  }
  first_ = false;
  previous_ = std::move(now);
}

std::vector<prometheus::MetricFamily> SeriesAccount::families() const {
  std::lock_guard lock(mu_);
  return {family("vigil_agent_series", "Series in the agent's last /metrics render, these three excluded.",
                 prometheus::MetricType::Gauge, static_cast<double>(previous_.size())),
          family("vigil_agent_series_created_total",
                 "Series present in a render that the render before did not have.",
                 prometheus::MetricType::Counter, static_cast<double>(created_)),
          family("vigil_agent_series_removed_total",
                 "Series of the render before that a render no longer had (exited processes, idle peers).",
                 prometheus::MetricType::Counter, static_cast<double>(removed_))};
}

}  // namespace vigil::agent
