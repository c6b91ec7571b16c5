// The agent's own process: CPU seconds, memory, open files and threads under the names every
// Prometheus client library's process collector uses (process_*), so a node's agent is watched
// like any other exporter.
#pragma once

#include <prometheus/collectable.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vigil::agent {

// The fields of /proc/PID/stat the process families need (proc(5): utime 14, stime 15,
// num_threads 20, starttime 22, vsize 23, rss 24), in the file's units.
struct ProcStat {
  uint64_t utime_ticks = 0;
  uint64_t stime_ticks = 0;
  uint64_t threads = 0;
  uint64_t start_ticks = 0;  // after boot
  uint64_t vsize_bytes = 0;
  uint64_t rss_pages = 0;
};

// Parses one /proc/PID/stat line; the comm field may hold spaces and parentheses, so fields are
// counted from its last ')'. nullopt when the line is cut short.
std::optional<ProcStat> parse_proc_stat(std::string_view line);

class ProcessCollector : public prometheus::Collectable {
 public:
  // Reads /proc/self under `proc_root` ("/proc").
  explicit ProcessCollector(std::string proc_root = "/proc") : proc_(std::move(proc_root)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string proc_;
};

}  // namespace vigil::agent
