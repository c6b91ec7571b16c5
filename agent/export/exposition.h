// The text a scrape returns: Prometheus' text format, with every label value valid UTF-8. Label
// values come from what workloads choose (process names, pod names from file names, peers), and
// one invalid byte makes Prometheus reject the whole scrape ("invalid label value"), blinding
// every alert of the node; so invalid bytes are replaced here, once, for every collector (and
// before that in the process labels, so that names aggregate after the replacement).
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace vigil::agent {

// Serializes FAMILIES (label values made valid first) in the text format, version 0.0.4.
std::string render_exposition(std::vector<prometheus::MetricFamily>& families);

}  // namespace vigil::agent
