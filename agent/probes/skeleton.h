// The part every probe loader shares: a BPF object's generated skeleton (bpftool gen skeleton)
// opened against the kernel BTF, loaded with its state maps pinned or not, destroyed last; and the
// set's figures in AgentStats (kernel counters, table entries) while it is loaded.
#pragma once

#include <bpf/libbpf.h>

#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "probes/bpf_util.h"
#include "probes/pinned_state.h"
#include "stats/agent_stats.h"

namespace vigil::agent {

// The three functions bpftool generates for object S: S__open_opts, S__load, S__destroy.
template <typename Skel>
struct SkeletonOps {
  Skel* (*open)(const bpf_object_open_opts*);
  int (*load)(Skel*);
  void (*destroy)(Skel*);
};

template <typename Skel>
class Skeleton {
 public:
  // SET names the object in errors and log lines ("cuda" for cuda.bpf.o).
  Skeleton(std::string set, SkeletonOps<Skel> ops) : set_(std::move(set)), ops_(ops), skel_(nullptr, ops.destroy) {}

  // Opens the object with the kernel BTF at BTF_PATH, lets CONFIGURE set what must be set before
  // load (read-only data, autoload), reuses or pins the maps named in PINNED under PIN_DIR ("":
  // none) and loads. On a pinned layout that does not match this build, says so and loads again
  // without pins (load_with_pins). Returns whether the maps are pinned; throws std::runtime_error.
  bool load(const std::string& btf_path, const std::string& pin_dir = "", const std::vector<const char*>& pinned = {},
            const std::function<void(Skel&)>& configure = {}) {
    return load_with_pins(set_, pin_dir, [&](const std::string& dir) {
      LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = btf_path.c_str());
      skel_.reset(ops_.open(&opts));
      if (!skel_) throw std::runtime_error("open " + set_ + ".bpf.o: " + errno_reason(errno));
      if (configure) configure(*skel_);
      if (!dir.empty())
        if (int err = pin_maps(skel_->obj, dir, pinned)) return err;
      return ops_.load(skel_.get());
    });
  }

  Skel* operator->() const { return skel_.get(); }
  Skel& operator*() const { return *skel_; }

 private:
  std::string set_;
  SkeletonOps<Skel> ops_;
  std::unique_ptr<Skel, void (*)(Skel*)> skel_;
};

// A loaded set's figures in AgentStats: its kernel counters (read_kernel_counters of PROBE_STATS
// and OBJ's programs; RUNNING: the adopted links' programs) and the entry count of each of TABLES.
// Unregistered when destroyed: declare it after the links and the skeleton it reads, so it goes first.
class SetStatsSources {
 public:
  SetStatsSources(AgentStats& stats, std::string set, const bpf_map* probe_stats, const bpf_object* obj,
                  std::vector<const bpf_map*> tables,
                  std::function<std::map<std::string, int>()> running = {})
      : stats_(stats), set_(std::move(set)), tables_(std::move(tables)) {
    stats_.add_kernel_source(set_, [probe_stats, obj, running = std::move(running)] {
      return read_kernel_counters(probe_stats, obj, running ? running() : std::map<std::string, int>{});
    });
    register_tables(stats_, set_, tables_);
  }
  ~SetStatsSources() {
    stats_.add_kernel_source(set_, [] { return KernelCounters{}; });
    register_tables(stats_, set_, tables_, true);
  }
  SetStatsSources(const SetStatsSources&) = delete;
  SetStatsSources& operator=(const SetStatsSources&) = delete;

 private:
  AgentStats& stats_;
  std::string set_;
  std::vector<const bpf_map*> tables_;
};

}  // namespace vigil::agent
