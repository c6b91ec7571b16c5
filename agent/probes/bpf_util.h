// RAII and small helpers shared by the probe loaders: links, per-CPU self-counters, BTF checks.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "stats/agent_stats.h"

namespace vigil::agent {

struct LinkDeleter {
  void operator()(bpf_link* link) const { bpf_link__destroy(link); }
};
using Link = std::unique_ptr<bpf_link, LinkDeleter>;

// Short, bounded reason for an attach failure metric label ("ENOENT", "EPERM", ...).
std::string errno_reason(int err);

// A probe set's tracepoint is absent from this kernel: the set is reported as tracepoint_missing,
// not as a failure to load.
class TracepointMissing : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A char array of a BPF struct (comm, device name): NUL-terminated only when shorter than the array.
template <size_t N>
std::string bpf_string(const char (&s)[N]) {
  return std::string(s, strnlen(s, N));
}

// A probe set's kernel counters: its per-CPU self-counters map (probe_stats) summed, and the
// kernel's own figures for each of the object's loaded programs (bpf_prog_info: run time and runs
// while statistics are on; recursion_misses always: runs skipped because the same program was
// already running on that CPU, e.g. a tp_btf program in process context interrupted by a softirq
// that hits its tracepoint, events the maps never saw). RUNNING: for a program whose link a
// previous agent made and this one adopted, the fd of the program that runs (by program name).
KernelCounters read_kernel_counters(const bpf_map* stats_map, const bpf_object* obj,
                                    const std::map<std::string, int>& running = {});

// True when the kernel's BTF declares the raw tracepoint NAME (the typedef tp_btf needs).
bool kernel_has_btf_tracepoint(const std::string& btf_path, const std::string& name);

// Number of entries in a BPF hash map (walks its keys).
uint64_t count_map_entries(const bpf_map* map);

// The USDT argument specs libbpf can hand out for OBJ's attachments: the size of the
// __bpf_usdt_specs map that <bpf/usdt.bpf.h> adds to the object (0 when it has none).
int usdt_spec_pool(const bpf_object* obj);

// Registers `maps` of probe set `set` as vigil_agent_table_entries sources; with `remove`,
// unregisters them (before the maps go away).
void register_tables(AgentStats& stats, const std::string& set, const std::vector<const bpf_map*>& maps,
                     bool remove = false);

// At most `per_second` log lines per second: a process failing in a loop must not flood the log.
class LogLimiter {
 public:
  explicit LogLimiter(int per_second) : per_second_(per_second) {}
  bool allow();

 private:
  int per_second_;
  long long second_ = 0;
  int used_ = 0;
};

// Iterates a hash map's keys; the map may change underneath, which only skips or repeats keys.
template <typename Key>
std::vector<Key> map_keys(int map_fd) {
  std::vector<Key> keys;
  Key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
    keys.push_back(next);
    key = next;
    prev = &key;
    if (keys.size() > (1u << 20)) break;  // no map of ours is this large; guard against loops
  }
  return keys;
}

// Every entry of a hash map, by key (an entry deleted between the walk and its lookup is skipped).
template <typename Key, typename Value>
std::map<Key, Value> map_entries(int map_fd) {
  std::map<Key, Value> entries;
  for (const Key& k : map_keys<Key>(map_fd)) {
    Value v{};
    if (bpf_map_lookup_elem(map_fd, &k, &v) == 0) entries[k] = v;
  }
  return entries;
}

}  // namespace vigil::agent
