// The agent's own bookkeeping (probes attached, attach failures, scrapes), shared by all parts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vigil::agent {

// What the kernel counts for one loaded BPF program (struct bpf_prog_info). run_time_ns and
// run_cnt grow only while the kernel's run-time statistics are on (bpf_enable_stats).
struct ProgramCost {
  std::string program;  // the program's function name in bpf/*.bpf.c
  uint64_t run_time_ns = 0;
  uint64_t runs = 0;
  uint64_t recursion_misses = 0;  // runs the kernel skipped: the program was already running on that CPU
};

// Counters a probe set's BPF object keeps in the kernel about itself.
struct KernelCounters {
  uint64_t events = 0;         // probe hits handled
  uint64_t ringbuf_drops = 0;  // ring buffer reservations that failed (events lost)
  uint64_t table_full = 0;     // inserts a full hash table refused
  std::vector<ProgramCost> programs;
};

// The housekeeping loop's timing: how late its last tick started and how long it ran.
struct LoopTiming {
  double lag_seconds = 0;
  double duration_seconds = 0;
  uint64_t ticks = 0;
};

class AgentStats {
 public:
  void set_enabled(const std::string& set, bool enabled, const std::string& why);
  void add_attached(const std::string& set, int n);
  void attach_failure(const std::string& set, const std::string& reason);
  // A file or process discovery did not use (discovery/mapped_file.h Refusal names).
  void discovery_refused(const std::string& reason);
  void ringbuf_event(const std::string& set);
  void record_scrape(const std::string& collector, double seconds);
  void record_housekeeping(double lag_seconds, double duration_seconds);
  void set_bpf_stats_enabled(bool on);
  void add_kernel_source(const std::string& set, std::function<KernelCounters()> read);
  // Entries held in one of the agent's tables (a BPF map or the label cache), read at scrape.
  void add_table_source(const std::string& set, const std::string& table, std::function<uint64_t()> count);

  struct Snapshot {
    std::map<std::string, std::pair<bool, std::string>> enabled;
    std::map<std::string, int64_t> attached;
    std::map<std::pair<std::string, std::string>, uint64_t> attach_failures;
    std::map<std::string, uint64_t> discovery_refused;
    std::map<std::string, uint64_t> ringbuf_events;
    std::map<std::string, std::pair<uint64_t, double>> scrapes;  // count, last duration
    std::map<std::string, KernelCounters> kernel;
    std::map<std::pair<std::string, std::string>, uint64_t> table_entries;
    LoopTiming housekeeping;
    bool bpf_stats_enabled = false;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  Snapshot s_;
  std::map<std::string, std::function<KernelCounters()>> kernel_sources_;
  std::map<std::pair<std::string, std::string>, std::function<uint64_t()>> table_sources_;
};

}  // namespace vigil::agent
