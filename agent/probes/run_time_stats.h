// Keeps the kernel's BPF run-time statistics on while the agent runs. The kernel counts each
// program's run time and runs (bpf_prog_info.run_time_ns, run_cnt) only while statistics are
// enabled: by the sysctl kernel.bpf_stats_enabled, or by holding the file descriptor that
// BPF_ENABLE_STATS returns (reference-counted, so closing ours never turns off someone else's).
// Costs two clock reads per program run, which is why the kernel leaves it off by default.
#pragma once

#include <string>

namespace vigil::agent {

class RunTimeStats {
 public:
  // With `enable` false nothing is asked of the kernel (config: bpf_stats: false).
  explicit RunTimeStats(bool enable);
  ~RunTimeStats();
  RunTimeStats(const RunTimeStats&) = delete;
  RunTimeStats& operator=(const RunTimeStats&) = delete;

  // True while run time is being counted (ours, or the sysctl set by someone else).
  bool counting() const;
  // Why we hold no statistics fd ("" when we do).
  const std::string& why_not() const { return why_not_; }

 private:
  int fd_ = -1;
  std::string why_not_;
};

}  // namespace vigil::agent
