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
  if (const char* name = strerrorname_np(err)) return name;
  // Appended rather than "E" + to_string(): GCC 12 at -O3 warns falsely on the latter (-Wrestrict,
  // GCC bug 105329), which broke Release builds of the agent.
  std::string unnamed = "E";
  unnamed += std::to_string(err);
  return unnamed;
}

KernelCounters read_kernel_counters(const bpf_map* stats_map, const bpf_object* obj,
                                    const std::map<std::string, int>& running) {
  KernelCounters out;
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, obj) {
    auto adopted = running.find(bpf_program__name(prog));
    int fd = adopted != running.end() ? adopted->second : bpf_program__fd(prog);
    if (fd < 0) continue;  // not loaded (autoload off)
    bpf_prog_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) continue;
    out.programs.push_back({bpf_program__name(prog), info.run_time_ns, info.run_cnt, info.recursion_misses});
  }
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || !stats_map) return out;
  std::vector<__u64> values(static_cast<size_t>(ncpu));
  const std::pair<__u32, uint64_t KernelCounters::*> stats[] = {
      {VIGIL_STAT_EVENTS, &KernelCounters::events},
      {VIGIL_STAT_RINGBUF_DROPS, &KernelCounters::ringbuf_drops},
      {VIGIL_STAT_TABLE_FULL, &KernelCounters::table_full},
  };
  for (auto [idx, field] : stats) {
    if (bpf_map_lookup_elem(bpf_map__fd(stats_map), &idx, values.data()) != 0) continue;
    __u64 sum = 0;
    for (__u64 v : values) sum += v;
    out.*field = sum;
  }
  return out;
}

int usdt_spec_pool(const bpf_object* obj) {
  const bpf_map* specs = bpf_object__find_map_by_name(obj, "__bpf_usdt_specs");
  return specs ? static_cast<int>(bpf_map__max_entries(specs)) : 0;
}

uint64_t count_map_entries(const bpf_map* map) {
  std::vector<char> key(bpf_map__key_size(map)), next(key.size());
  const void* prev = nullptr;
  uint64_t n = 0;
  while (bpf_map_get_next_key(bpf_map__fd(map), prev, next.data()) == 0 && n < (1u << 22)) {
    ++n;
    key.swap(next);
    prev = key.data();
  }
  return n;
}

void register_tables(AgentStats& stats, const std::string& set, const std::vector<const bpf_map*>& maps,
                     bool remove) {
  for (const bpf_map* m : maps)
    stats.add_table_source(set, bpf_map__name(m),
                           remove ? std::function<uint64_t()>() : [m] { return count_map_entries(m); });
}

bool LogLimiter::allow() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (now.tv_sec != second_) {
    second_ = now.tv_sec;
    used_ = 0;
  }
  return used_++ < per_second_;
}

bool kernel_has_btf_tracepoint(const std::string& btf_path, const std::string& name) {
  btf* vmlinux = btf__parse(btf_path.c_str(), nullptr);
  if (!vmlinux) return false;
  bool found = btf__find_by_name_kind(vmlinux, ("btf_trace_" + name).c_str(), BTF_KIND_TYPEDEF) > 0;
  btf__free(vmlinux);
  return found;
}

}  // namespace vigil::agent
