// A probe set's tracepoint links (tp_btf, tracepoint, raw_tp), each pinned at DIR/<program name>
// so the kernel keeps running them while no agent does; the next agent adopts them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "probes/bpf_util.h"

namespace vigil::agent {

class PinnedLinks {
 public:
  // DIR "": nothing is pinned, every link is detached with this object. SHARED: the set's pinned
  // maps, which an adopted link's program must use (and not maps of its own).
  PinnedLinks(std::string set, std::string dir, const std::vector<const bpf_map*>& shared);
  // Pinned links stay in the kernel; the others are detached.
  ~PinnedLinks();
  PinnedLinks(const PinnedLinks&) = delete;
  PinnedLinks& operator=(const PinnedLinks&) = delete;

  // Runs the loaded PROG on its tracepoint: adopts the link pinned for it when that link runs the
  // same instructions on the same shared maps (a restart of this build: no event missed or seen
  // twice), else replaces it (another build or layout) and pins the new one. 0 or -errno.
  int attach(bpf_program* prog);
  // PROG is not loaded (disabled, or the other form of a pair): a link pinned for it goes.
  void drop(const bpf_program* prog);
  int size() const { return static_cast<int>(links_.size()); }
  // The programs that run in adopted links (fds, by program name): the previous agent's, whose
  // kernel statistics (runs, run time, recursion misses) continue.
  const std::map<std::string, int>& running() const { return running_; }
  // One log line: how many links were adopted, replaced and attached afresh.
  void report() const;

 private:
  Link adopt(const std::string& path, const bpf_program* prog, int& running_fd);
  std::string set_, dir_;
  std::vector<__u32> shared_ids_;
  std::vector<Link> links_;
  std::map<std::string, int> running_;
  int adopted_ = 0, replaced_ = 0;
};

}  // namespace vigil::agent
