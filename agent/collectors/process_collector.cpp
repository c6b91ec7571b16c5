// Names, types and units follow client_golang's process collector
// (prometheus/process_collector.go, process_collector_procfs.go: process_cpu_seconds_total,
// process_open_fds, process_max_fds, process_virtual_memory_bytes, process_resident_memory_bytes,
// process_start_time_seconds) and, for threads, the Rust client's (tikv/rust-prometheus,
// src/process_collector.rs: process_threads).
#include "collectors/process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <vector>

#include "collectors/metric_builder.h"

namespace vigil::agent {

using prometheus::MetricType;

std::optional<ProcStat> parse_proc_stat(std::string_view line) {
  auto close = line.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // Fields after comm, numbered as in proc(5): the first one here (state) is field 3.
  std::vector<uint64_t> fields(25, 0);
  size_t field = 3, pos = close + 1;
  while (field <= 24) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    if (pos >= line.size()) return std::nullopt;
    size_t end = line.find(' ', pos);
    if (end == std::string_view::npos) end = line.size();
    if (field >= 14) {
      auto [ptr, ec] = std::from_chars(line.data() + pos, line.data() + end, fields[field]);
      if (ec != std::errc() || ptr != line.data() + end) return std::nullopt;
    }
    pos = end;
    ++field;
  }
  return ProcStat{fields[14], fields[15], fields[20], fields[22], fields[23], fields[24]};
}

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Boot time in seconds since the epoch (/proc/stat "btime").
std::optional<double> boot_time(const std::string& proc) {
  std::ifstream in(proc + "/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double t = 0;
      if (in >> t) return t;
      return std::nullopt;
    }
    in.ignore(1 << 20, '\n');
  }
  return std::nullopt;
}

std::optional<uint64_t> count_open_fds(const std::string& fd_dir) {
  DIR* d = opendir(fd_dir.c_str());
  if (!d) return std::nullopt;
  uint64_t n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the descriptor opendir holds is one of them
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  auto gauge = [&out](const char* name, const char* help, double v) {
    out.push_back(make_family(name, help, MetricType::Gauge));
    add_sample(out.back(), {}, v);
  };
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (auto st = parse_proc_stat(read_first_line(proc_ + "/self/stat"))) {
    out.push_back(make_family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                              MetricType::Counter));
    add_sample(out.back(), {}, static_cast<double>(st->utime_ticks + st->stime_ticks) / tick);
    gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", static_cast<double>(st->vsize_bytes));
    gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
          static_cast<double>(st->rss_pages) * page);
    gauge("process_threads", "Number of OS threads in the process.", static_cast<double>(st->threads));
    if (auto boot = boot_time(proc_))
      gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
            *boot + static_cast<double>(st->start_ticks) / tick);
  }
  if (auto fds = count_open_fds(proc_ + "/self/fd"))
    gauge("process_open_fds", "Number of open file descriptors.", static_cast<double>(*fds));
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    gauge("process_max_fds", "Maximum number of open file descriptors.", static_cast<double>(lim.rlim_cur));
  return out;
}

}  // namespace vigil::agent
