// BPF_ENABLE_STATS (Linux 5.8, kernel/bpf/syscall.c: bpf_enable_runtime_stats) takes type
// BPF_STATS_RUN_TIME and returns an anon-inode fd; the static key stays on while any such fd is
// open or the sysctl is 1.
#include "probes/run_time_stats.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <fstream>

#include "probes/bpf_util.h"

namespace vigil::agent {

RunTimeStats::RunTimeStats(bool enable) {
  if (!enable) {
    why_not_ = "disabled_by_config";
    return;
  }
  fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd_ < 0) why_not_ = errno_reason(fd_);  // libbpf returns -errno
}

RunTimeStats::~RunTimeStats() {
  if (fd_ >= 0) close(fd_);
}

bool RunTimeStats::counting() const {
  if (fd_ >= 0) return true;
  std::ifstream sysctl("/proc/sys/kernel/bpf_stats_enabled");
  int on = 0;
  return static_cast<bool>(sysctl >> on) && on == 1;
}

}  // namespace vigil::agent
