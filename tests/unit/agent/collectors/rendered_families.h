// Lookups in what a collector rendered, for the tests that hand collectors made-up snapshots.
#pragma once

#include <prometheus/metric_family.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace vigil::agent {

// The family NAME of FS; throws when the collector rendered none.
inline const prometheus::MetricFamily& family(const std::vector<prometheus::MetricFamily>& fs,
                                              const std::string& name) {
  for (const auto& f : fs)
    if (f.name == name) return f;
  throw std::runtime_error(std::string("no family ") + name);
}

// The value of M's label NAME, "<none>" when M has no such label.
inline std::string label(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label)
    if (l.name == name) return l.value;
  return "<none>";
}

}  // namespace vigil::agent
