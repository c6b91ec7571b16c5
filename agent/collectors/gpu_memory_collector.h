// Exports GPU memory behaviour per process from cuda.bpf.c: live bytes, VMM, failures, and
// gpu_memory_fragmentation_ratio over a sliding window; allocation sizes per container and program.
#pragma once

#include <linux/types.h>
#include <prometheus/collectable.h>

#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "collectors/group_sums.h"
#include "cuda_events.h"
#include "discovery/process_table.h"
#include "probes/cuda_maps.h"

namespace vigil::agent {

class GpuMemoryCollector : public prometheus::Collectable {
 public:
  using Clock = std::chrono::steady_clock;
  // `accounting_since_ns`: when the kernel maps began to count (CLOCK_BOOTTIME ns); a process
  // started before it may have allocated unseen, and is marked incomplete.
  GpuMemoryCollector(const CudaReader& maps, std::chrono::milliseconds window, ProcessTable& processes,
                     uint64_t accounting_since_ns)
      : maps_(maps), window_(window), processes_(processes), since_ns_(accounting_since_ns),
        retired_sizes_(processes.grace()) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

  // Called once per housekeeping tick, after the set's expiry, with the live processes' state:
  // records allocation counts for the sliding window, and drops the retired sizes of groups with
  // no process left after the grace.
  void sample(const CudaSnapshot& now);
  // PID is gone past its grace period (the set forgets its kernel state next): its allocation
  // sizes stay in its group's histogram (group_sums.h), its window and completeness go, and a
  // scrape before the next sample leaves it out of the maps' snapshot (counted once).
  void retire(uint32_t pid, const cuda_proc& last);

 private:
  struct Sample {
    Clock::time_point at;
    uint64_t allocs;
    uint64_t small;
  };
  // The allocation-size histogram of a process, summed per container and program: per process
  // its 44 series were the largest cost on a GPU node (docs/probes-agent.md, "Series budget").
  struct AllocSizes {
    std::array<uint64_t, CUDA_HIST_BUCKETS> buckets{};
    uint64_t bytes = 0;
    AllocSizes& operator+=(const AllocSizes& o);
  };
  static AllocSizes sizes_of(const cuda_proc& p);
  // Whether the maps counted PID from its start (mu_ held; decided once, while it lives).
  bool complete(uint32_t pid) const;

  const CudaReader& maps_;
  std::chrono::milliseconds window_;
  ProcessTable& processes_;
  uint64_t since_ns_;
  mutable std::mutex mu_;
  mutable std::map<uint32_t, bool> complete_;
  std::map<uint32_t, std::deque<Sample>> samples_;
  RetiredSums<AllocSizes> retired_sizes_;
  std::set<uint32_t> retired_pids_;  // retired since the last sample, maybe still in the maps
};

}  // namespace vigil::agent
