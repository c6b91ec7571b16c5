// Helpers shared by the probe loaders.
#include "probes/bpf_util.h"

#include <bpf/btf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "probe_stats.h"

namespace vigil::agent {

std::string errno_reason(int err) {
  if (err < 0) err = -err;
  const char* name = strerrorname_np(err);
  return name ? name : "E" + std::to_string(err);
}

KernelCounters read_probe_stats(const bpf_map* stats_map) {
  KernelCounters out;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || !stats_map) return out;
  std::vector<__u64> values(static_cast<size_t>(ncpu));
  for (__u32 idx : {static_cast<__u32>(VIGIL_STAT_EVENTS), static_cast<__u32>(VIGIL_STAT_RINGBUF_DROPS)}) {
    if (bpf_map_lookup_elem(bpf_map__fd(stats_map), &idx, values.data()) != 0) continue;
    __u64 sum = 0;
    for (__u64 v : values) sum += v;
    (idx == VIGIL_STAT_EVENTS ? out.events : out.ringbuf_drops) = sum;
  }
  return out;
}

bool kernel_has_btf_tracepoint(const std::string& btf_path, const std::string& name) {
  btf* vmlinux = btf__parse(btf_path.c_str(), nullptr);
  if (!vmlinux) return false;
  bool found = btf__find_by_name_kind(vmlinux, ("btf_trace_" + name).c_str(), BTF_KIND_TYPEDEF) > 0;
  btf__free(vmlinux);
  return found;
}

}  // namespace vigil::agent
