// GPU memory collector. gpu_memory_fragmentation_ratio is the source document's definition:
// successful allocations of at most 4 KiB over all successful allocations, counted over the
// last `windows.fragmentation` (default 5 min, sampled every poll interval, so the window is
// that long rounded up to one poll interval). With no allocation in the window it is absent.
// The allocation-size histogram is summed per container and program; exited processes' sizes
// stay in it (group_sums.h), so its counts do not go back while the program runs.
// gpu_memory_accounting_complete is 0 for a process that started before the kernel maps began to
// count (the first agent since the pins existed): its allocations before that were never seen.
#include "collectors/gpu_memory_collector.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "probes/bpf_util.h"
#include "probes/cuda_result.h"
#include "probes/pinned_state.h"

namespace vigil::agent {

using prometheus::MetricType;

void GpuMemoryCollector::retire(uint32_t pid, const cuda_proc& last) {
  // Labels are read while the process lives and kept past its exit.
  const LabelList group = group_of(process_labels(processes_, pid, bpf_string(last.comm)));
  std::lock_guard lock(mu_);
  retired_sizes_.retire(group, sizes_of(last), Clock::now());
  retired_pids_.insert(pid);
  samples_.erase(pid);
  complete_.erase(pid);
}

bool GpuMemoryCollector::complete(uint32_t pid) const {
  auto it = complete_.find(pid);
  if (it != complete_.end()) return it->second;
  // Start times are in clock ticks, rounded down: a process started in the tick of since_ns_
  // counts as incomplete, never the reverse. Unreadable (gone already): not known, so incomplete.
  uint64_t start = process_start_ns(processes_.proc_root(), pid);
  return complete_[pid] = start != 0 && start >= since_ns_;
}

GpuMemoryCollector::AllocSizes& GpuMemoryCollector::AllocSizes::operator+=(const AllocSizes& o) {
  for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += o.buckets[i];
  bytes += o.bytes;
  return *this;
}

GpuMemoryCollector::AllocSizes GpuMemoryCollector::sizes_of(const cuda_proc& p) {
  AllocSizes s;
  std::copy(p.size_hist, p.size_hist + CUDA_HIST_BUCKETS, s.buckets.begin());
  s.bytes = p.alloc_bytes;
  return s;
}

void GpuMemoryCollector::sample(const CudaSnapshot& snapshot) {
  auto now = Clock::now();
  std::lock_guard lock(mu_);
  retired_pids_.clear();       // the set forgets what it retires before it samples
  std::set<LabelList> alive;  // groups with a member whose counts stay in the map
  for (const auto& [pid, p] : snapshot.procs) {
    alive.insert(group_of(process_labels(processes_, pid, bpf_string(p.comm))));
    auto& s = samples_[pid];
    s.push_back({now, p.allocs, p.small_allocs});
    // Keep one sample at or before the window's start: it is the baseline.
    while (s.size() > 1 && s[1].at <= now - window_) s.pop_front();
  }
  retired_sizes_.expire(alive, now);
}

std::vector<prometheus::MetricFamily> GpuMemoryCollector::Collect() const {
  auto now = Clock::now();
  // Read under the lock, without the processes retired but not yet forgotten: their sizes are
  // in the retired sums already.
  std::lock_guard lock(mu_);
  CudaSnapshot snapshot = maps_.read();
  for (uint32_t pid : retired_pids_) snapshot.procs.erase(pid);
  const auto& procs = snapshot.procs;
  const auto& errors = snapshot.errors;

  auto ratio = make_family("gpu_memory_fragmentation_ratio",
                           "Allocations of at most 4 KiB over all allocations in the sliding window (windows.fragmentation).",
                           MetricType::Gauge);
  auto live = make_family("gpu_memory_live_bytes",
                          "Device memory the process holds: driver allocations plus VMM mappings.", MetricType::Gauge);
  auto driver = make_family("gpu_memory_driver_allocated_bytes",
                            "Live cuMemAlloc*-family allocations.", MetricType::Gauge);
  auto mapped = make_family("gpu_memory_vmm_mapped_bytes", "Bytes mapped with cuMemMap and not unmapped.", MetricType::Gauge);
  auto physical = make_family("gpu_memory_vmm_physical_bytes", "Bytes created with cuMemCreate and not released.", MetricType::Gauge);
  auto reserved = make_family("gpu_memory_vmm_reserved_bytes", "Virtual address space reserved with cuMemAddressReserve.", MetricType::Gauge);
  auto allocs = make_family("gpu_memory_allocations_total", "Successful allocations (driver allocs and cuMemCreate).", MetricType::Counter);
  auto small = make_family("gpu_memory_small_allocations_total", "Successful allocations of at most 4 KiB.", MetricType::Counter);
  auto untracked = make_family("gpu_memory_untracked_allocations_total",
                               "Allocations the agent could not keep (the process at its cap of table entries, or "
                               "the node's table full): counted, but left out of the live and VMM physical gauges.",
                               MetricType::Counter);
  auto hist = make_family("gpu_memory_allocation_size_bytes",
                          "Sizes of successful allocations, by container and program (not by process).",
                          MetricType::Histogram);
  auto failures = make_family("gpu_memory_allocation_failures_total",
                              "Failed allocation calls, by CUDA error name.", MetricType::Counter);
  auto complete_family = make_family("gpu_memory_accounting_complete",
                                     "1 when the agent's maps counted the process from its start; 0 when it "
                                     "started before them and its gauges may miss older allocations.",
                                     MetricType::Gauge);

  std::vector<double> bounds;
  for (int i = 0; i < CUDA_HIST_BUCKETS - 1; ++i) bounds.push_back(std::ldexp(1.0, i));
  bounds.push_back(std::numeric_limits<double>::infinity());

  std::map<uint32_t, LabelList> labels;
  std::map<LabelList, AllocSizes> sizes = retired_sizes_.sums();
  for (const auto& [pid, p] : procs) {
    LabelList l = process_labels(processes_, pid, bpf_string(p.comm));
    labels[pid] = l;
    uint64_t base_allocs = 0, base_small = 0;
    if (auto it = samples_.find(pid); it != samples_.end() && !it->second.empty() &&
                                      it->second.front().at <= now - window_) {
      base_allocs = it->second.front().allocs;
      base_small = it->second.front().small;
    }
    if (p.allocs > base_allocs)
      add_sample(ratio, l, static_cast<double>(p.small_allocs - base_small) /
                               static_cast<double>(p.allocs - base_allocs));
    add_sample(complete_family, l, complete(pid) ? 1.0 : 0.0);
    add_sample(live, l, static_cast<double>(p.live_bytes + p.vmm_mapped_bytes));
    add_sample(driver, l, static_cast<double>(p.live_bytes));
    add_sample(mapped, l, static_cast<double>(p.vmm_mapped_bytes));
    add_sample(physical, l, static_cast<double>(p.vmm_physical_bytes));
    add_sample(reserved, l, static_cast<double>(p.vmm_reserved_bytes));
    add_sample(allocs, l, static_cast<double>(p.allocs));
    add_sample(small, l, static_cast<double>(p.small_allocs));
    if (p.untracked_allocs) add_sample(untracked, l, static_cast<double>(p.untracked_allocs));
    if (p.allocs) sizes[group_of(l)] += sizes_of(p);
  }
  for (const auto& [group, s] : sizes)
    add_histogram(hist, group, bounds, std::vector<uint64_t>(s.buckets.begin(), s.buckets.end()),
                  static_cast<double>(s.bytes));
  std::map<std::pair<uint32_t, std::string>, uint64_t> by_error;
  for (const auto& [k, n] : errors) {
    bool is_alloc = k.fn <= CUDA_FN_MEM_ALLOC_MANAGED || k.fn == CUDA_FN_MEM_CREATE;
    if (is_alloc && labels.count(k.tgid)) by_error[{k.tgid, cuda_result_name(k.result)}] += n;
  }
  for (const auto& [key, n] : by_error) {
    LabelList l = labels[key.first];
    l.emplace_back("error", key.second);
    add_sample(failures, l, static_cast<double>(n));
  }
  return {ratio, complete_family, live, driver, mapped, physical, reserved, allocs, small, untracked, hist, failures};
}

}  // namespace vigil::agent
