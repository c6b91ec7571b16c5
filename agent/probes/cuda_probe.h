// Loads cuda.bpf.c and attaches it to each distinct libcuda.so.1 the agent finds; logs the
// failure context the kernel side sends through its ring buffer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "probes/bpf_util.h"
#include "probes/ring_reader.h"
#include "probes/skeleton.h"
#include "probes/uprobe_set.h"
#include "stats/agent_stats.h"

struct cuda_bpf;

namespace vigil::agent {

class CudaProbe {
 public:
  // `off`: driver functions not to probe (names(); a name covers its _ptsz variant). `pin_dir`:
  // the bpffs directory its accounting maps are pinned in and reused from ("": not pinned).
  CudaProbe(const std::string& btf_path, AgentStats& stats, const std::set<std::string>& off = {},
            const std::string& pin_dir = "");  // throws std::runtime_error
  // The driver functions it probes, as probes.disable names them.
  static std::vector<std::string> names();
  ~CudaProbe();
  CudaProbe(const CudaProbe&) = delete;
  CudaProbe& operator=(const CudaProbe&) = delete;

  int attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name) {
    return uprobes_->attach(path, dev, inode, name);
  }
  int attach_pinned(const std::string& path) { return uprobes_->attach_pinned(path); }
  void release_unmapped(const std::set<UprobeSet::FileId>& mapped, std::chrono::milliseconds grace) {
    uprobes_->release_unmapped(mapped, grace);
  }
  // With pins: removes the links previous agents pinned (they ran beside this one's meanwhile, so
  // no call was missed); call once this agent has attached to every mapped libcuda.
  void release_previous_links() { uprobes_->release_previous_links(); }
  // Registers the failure ring with `reader` (each failure is logged from the reader's thread).
  void add_rings(RingReader& reader);

  int procs_fd() const;
  int errors_fd() const;
  int live_fd() const;
  int handles_fd() const;
  // When the accounting in its maps began (CLOCK_BOOTTIME ns): the first agent that created the
  // pinned maps, or this one when they are not pinned.
  uint64_t accounting_since_ns() const { return since_ns_; }

 private:
  static int on_failure(void* ctx, void* data, size_t size);
  void read_since();
  AgentStats& stats_;
  LogLimiter log_limit_{50};  // the reader's thread only
  Skeleton<cuda_bpf> skel_;
  uint64_t since_ns_ = 0;
  bool pinned_ = false;
  std::unique_ptr<UprobeSet> uprobes_;  // links go first, then the object
  std::unique_ptr<SetStatsSources> stats_sources_;  // unregistered before the links go
};

}  // namespace vigil::agent
