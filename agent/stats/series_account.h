// How many series the agent exports and how fast the set changes: what an SRE pays for the agent
// in the TSDB (docs/probes-agent.md, "Series budget").
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace vigil::agent {

class SeriesAccount {
 public:
  // Counts the series of one render (a histogram: its buckets, _sum and _count) and compares
  // them with the previous render's: series new since then are created, series gone removed.
  void observe(const std::vector<prometheus::MetricFamily>& families);
  // vigil_agent_series (this render's, these three excluded), vigil_agent_series_created_total,
  // vigil_agent_series_removed_total.
  std::vector<prometheus::MetricFamily> families() const;

 private:
  mutable std::mutex mu_;
  std::unordered_set<uint64_t> previous_;
  bool first_ = true;
  uint64_t created_ = 0, removed_ = 0;
};

}  // namespace vigil::agent
