// XID collector: gpu_xid_errors_total{gpu, xid} from xid.bpf.c's counters. (DCGM-exporter keeps
// only the last XID value per GPU, so a burst 79 -> 48 -> 13 shows as 13.)
#include "collectors/xid_collector.h"

#include "collectors/metric_builder.h"
#include "probes/bpf_util.h"

namespace vigil::agent {

std::vector<prometheus::MetricFamily> XidCollector::Collect() const {
  auto f = make_family("gpu_xid_errors_total", "NVIDIA XID errors reported by the driver, by GPU (PCI) and XID code.",
                       prometheus::MetricType::Counter);
  for (const auto& [k, n] : maps_.read().counts)
    add_sample(f, {{"gpu", bpf_string(k.dev)}, {"xid", std::to_string(k.code)}}, static_cast<double>(n));
  return {f};
}

}  // namespace vigil::agent
