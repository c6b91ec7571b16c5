// Allocator collector. Two measures that mean what they say, next to the source document's ratio:
//   cached slack            (reserved - allocated) / reserved: memory the cache holds but no
//                           tensor uses;
//   external fragmentation  1 - largest free block / free bytes inside reserved memory: how
//                           scattered that free memory is (only allocators that report their
//                           largest free block, i.e. vigil:alloc_snapshot).
// Reserved comes from the allocator's own snapshot, or for PyTorch from the driver probes of the
// same process (its segments are cuMemAlloc'd or VMM-mapped).
#include "collectors/allocator_collector.h"

#include <linux/types.h>

#include <map>
#include <set>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "cuda_events.h"
#include "probes/bpf_util.h"
#include "usdt_events.h"

namespace vigil::agent {

using prometheus::MetricType;

std::vector<prometheus::MetricFamily> AllocatorCollector::Collect() const {
  auto allocated = make_family("gpu_memory_allocator_allocated_bytes",
                               "Bytes of blocks the caching allocator has handed out and not taken back.", MetricType::Gauge);
  auto reserved = make_family("gpu_memory_allocator_reserved_bytes",
                              "Bytes the caching allocator holds from the driver.", MetricType::Gauge);
  auto mallocs = make_family("gpu_memory_allocator_block_allocations_total", "Blocks handed out.", MetricType::Counter);
  auto frees = make_family("gpu_memory_allocator_block_frees_total", "Blocks given back.", MetricType::Counter);
  auto paired = make_family("gpu_memory_allocator_paired_bytes",
                            "Bytes of the blocks the agent saw handed out and not given back (its own pairing of "
                            "the alloc and free probes; 0-floored only by what it missed before attaching).",
                            MetricType::Gauge);
  auto slack = make_family("gpu_memory_cached_slack_ratio", "(reserved - allocated) / reserved of the caching allocator.",
                           MetricType::Gauge);
  auto external = make_family("gpu_memory_external_fragmentation_ratio",
                              "1 - largest free block / free bytes inside the allocator's reserved memory.", MetricType::Gauge);
  const UsdtSnapshot snapshot = maps_.read();
  // The driver probes count per process, not per device: their bytes stand for PyTorch's reserved
  // memory only while the process's PyTorch blocks are on one device.
  std::map<uint32_t, std::set<int32_t>> pytorch_devices;
  for (const auto& [k, s] : snapshot.allocators)
    if (k.allocator == USDT_ALLOC_PYTORCH && k.device != USDT_DEVICE_UNKNOWN) pytorch_devices[k.tgid].insert(k.device);
  const CudaSnapshot driver = cuda_ && !pytorch_devices.empty() ? cuda_->read() : CudaSnapshot{};
  for (const auto& [k, s] : snapshot.allocators) {
    LabelList l = process_labels(processes_, k.tgid, bpf_string(s.comm));
    l.emplace_back("allocator", k.allocator == USDT_ALLOC_PYTORCH ? "pytorch" : "vigil");
    l.emplace_back("gpu", k.device == USDT_DEVICE_UNKNOWN ? "" : std::to_string(k.device));
    add_sample(mallocs, l, static_cast<double>(s.mallocs));
    add_sample(frees, l, static_cast<double>(s.frees));
    add_sample(paired, l, static_cast<double>(s.allocated_bytes));
    // The allocator's own account wins over our pairing of alloc/free (it saw every block).
    uint64_t used = s.snapshots ? s.snapshot_allocated_bytes : s.allocated_bytes;
    add_sample(allocated, l, static_cast<double>(used));
    uint64_t held = s.reserved_bytes;
    if (!s.snapshots && k.device != USDT_DEVICE_UNKNOWN && pytorch_devices[k.tgid].size() == 1)
      if (auto c = driver.procs.find(k.tgid); c != driver.procs.end())
        held = c->second.live_bytes + c->second.vmm_mapped_bytes;
    if (held == 0) continue;
    add_sample(reserved, l, static_cast<double>(held));
    add_sample(slack, l, held > used ? static_cast<double>(held - used) / static_cast<double>(held) : 0.0);
    if (s.snapshots && held > used)
      add_sample(external, l, 1.0 - static_cast<double>(s.largest_free_block_bytes) / static_cast<double>(held - used));
  }
  return {allocated, paired, reserved, mallocs, frees, slack, external};
}

}  // namespace vigil::agent
