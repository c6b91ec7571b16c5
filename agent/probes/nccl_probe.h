// Loads nccl.bpf.c and attaches it to each distinct libnccl.so.2 the agent finds; logs the
// failure context (failed calls, async errors) the kernel side sends through its ring buffer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "probes/skeleton.h"
#include "probes/bpf_util.h"
#include "probes/ring_reader.h"
#include "probes/uprobe_set.h"
#include "stats/agent_stats.h"

struct nccl_bpf;

namespace vigil::agent {

class NcclProbe {
 public:
  // `off`: NCCL functions not to probe (names()). `pin_dir`: the bpffs directory its accounting
  // maps and links are pinned in and reused from ("": not pinned).
  NcclProbe(const std::string& btf_path, AgentStats& stats, const std::set<std::string>& off = {},
            const std::string& pin_dir = "");  // throws std::runtime_error
  // The NCCL functions it probes, as probes.disable names them.
  static std::vector<std::string> names();
  ~NcclProbe();
  NcclProbe(const NcclProbe&) = delete;
  NcclProbe& operator=(const NcclProbe&) = delete;

  int attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name) {
    return uprobes_->attach(path, dev, inode, name);
  }
  int attach_pinned(const std::string& path) { return uprobes_->attach_pinned(path); }
  void release_unmapped(const std::set<UprobeSet::FileId>& mapped, std::chrono::milliseconds grace) {
    uprobes_->release_unmapped(mapped, grace);
  }
  // With pins: removes the links previous agents pinned (UprobeSet::release_previous_links); call
  // once this agent has attached to every mapped libnccl.
  void release_previous_links() { uprobes_->release_previous_links(); }
  // Registers the failure ring with `reader` (each failure is logged from the reader's thread).
  void add_rings(RingReader& reader);

  int calls_fd() const;
  int async_errors_fd() const;
  int procs_fd() const;
  int comms_fd() const;

 private:
  static int on_failure(void* ctx, void* data, size_t size);
  AgentStats& stats_;
  LogLimiter log_limit_{50};  // the reader's thread only
  Skeleton<nccl_bpf> skel_;
  std::unique_ptr<UprobeSet> uprobes_;  // links go first, then the object
  std::unique_ptr<SetStatsSources> stats_sources_;  // unregistered before the links go
};

// "ncclSuccess", "ncclUnhandledCudaError", ... for ncclResult_t values.
std::string nccl_result_name(int result);
const char* nccl_fn_name(unsigned fn);

}  // namespace vigil::agent
