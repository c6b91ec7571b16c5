// XID collector: gpu_xid_errors_total{gpu, xid, class, process} from the ledger. (DCGM-exporter
// keeps only the last XID value per GPU, so a burst 79 -> 48 -> 13 shows as 13.)
#include "collectors/xid_collector.h"

#include "collectors/metric_builder.h"
#include "collectors/xid_catalogue.h"

namespace vigil::agent {

std::vector<prometheus::MetricFamily> XidCollector::Collect() const {
  const XidSnapshot s = ledger_.read();
  auto xids = make_family("gpu_xid_errors_total",
                          "NVIDIA XID errors reported by the driver, by GPU (PCI), XID code, class (NVIDIA's "
                          "catalogue: fatal pages) and the process the driver named.",
                          prometheus::MetricType::Counter);
  for (const auto& [series, n] : s.counts)
    add_sample(xids,
               {{"gpu", series.gpu},
                {"xid", std::to_string(series.code)},
                {"class", std::string(xid_class_name(xid_class(series.code)))},
                {"process", series.process}},
               static_cast<double>(n));
  auto counter = [](const char* name, const char* help, uint64_t value) {
    auto f = make_family(name, help, prometheus::MetricType::Counter);
    add_sample(f, {}, static_cast<double>(value));
    return f;
  };
  return {xids,
          counter("vigil_agent_xid_log_lines_total", "NVIDIA XID lines of the kernel read from the kernel log.",
                  s.log_lines),
          counter("vigil_agent_xid_forged_lines_total",
                  "XID-looking kernel log lines a process wrote to /dev/kmsg (not the kernel's facility): never counted.",
                  s.forged_lines),
          counter("vigil_agent_kmsg_records_lost_total",
                  "Kernel log records the kernel overwrote before the agent read them.", s.records_lost),
          counter("vigil_agent_xid_series_dropped_total",
                  "XIDs counted with process=\"\" because the series limit was reached.", s.series_dropped)};
}

}  // namespace vigil::agent
