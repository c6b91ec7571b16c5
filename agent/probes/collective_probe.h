// Loads collective.bpf.c and attaches the worker's vigil:collective_begin/collective_end USDT
// probes in each distinct worker binary; failed collectives arrive through a ring buffer.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "probes/bpf_util.h"
#include "probes/file_links.h"
#include "probes/ring_reader.h"
#include "probes/skeleton.h"
#include "stats/agent_stats.h"

struct collective_bpf;
struct collective_failure;

namespace vigil::agent {

class CollectiveProbe {
 public:
  using OnFailure = std::function<void(const collective_failure&)>;
  // Throws std::runtime_error when the object cannot be loaded. `pin_dir`: the bpffs directory its
  // maps are pinned in and reused from ("": not pinned); its USDT links are never pinned.
  CollectiveProbe(const std::string& btf_path, AgentStats& stats, OnFailure on_failure,
                  const std::string& pin_dir = "");
  ~CollectiveProbe();
  CollectiveProbe(const CollectiveProbe&) = delete;
  CollectiveProbe& operator=(const CollectiveProbe&) = delete;

  // Attaches both probes in the file once per device + inode; returns links made (0 when the file
  // has no collective probes: not a worker binary). Notes are checked first (UsdtProbe::attach).
  int attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name);
  // Same, for a file named in the config: attached whether or not a process maps it.
  int attach(const std::string& path);
  // After a full scan: files no process has mapped for `grace` are detached (FileLinks).
  void release_unmapped(const std::set<FileLinks::FileId>& mapped, std::chrono::milliseconds grace) {
    files_.release_unmapped(mapped, grace);
  }
  // Registers the failure ring with `reader`: the callback runs on the reader's thread.
  void add_rings(RingReader& reader);

  int procs_fd() const;
  int groups_fd() const;

 private:
  static int on_event(void* ctx, void* data, size_t size);
  AgentStats& stats_;
  OnFailure on_failure_;
  Skeleton<collective_bpf> skel_;
  FileLinks files_;  // destroyed before the skeleton: declared after it
  std::unique_ptr<SetStatsSources> stats_sources_;  // unregistered before the links go
};

}  // namespace vigil::agent
