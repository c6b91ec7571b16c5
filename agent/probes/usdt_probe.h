// Loads usdt.bpf.c and attaches the caching-allocator USDT probes (PyTorch's pytorch:*, the
// worker's vigil:*) in each distinct binary or library the agent finds them in.
#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "probes/bpf_util.h"
#include "probes/file_links.h"
#include "probes/skeleton.h"
#include "stats/agent_stats.h"

struct usdt_bpf;

namespace vigil::agent {

class UsdtProbe {
 public:
  // `off`: probes not to attach, as "PROVIDER:NAME" (names()).
  // `pin_dir`: the bpffs directory its maps are pinned in and reused from ("": not pinned); its
  // links are not (libbpf's USDT link is many uprobe links under one handle, without an fd).
  UsdtProbe(const std::string& btf_path, AgentStats& stats, std::set<std::string> off = {},
            const std::string& pin_dir = "");  // throws std::runtime_error
  // The USDT probes it attaches, as probes.disable names them.
  static std::vector<std::string> names();
  ~UsdtProbe();
  UsdtProbe(const UsdtProbe&) = delete;
  UsdtProbe& operator=(const UsdtProbe&) = delete;

  // Attaches every known probe found in the file (once per device + inode); returns links made.
  // A file whose notes do not hold together, or with more than kMaxUsdtSitesPerFile sites of the
  // probes attached here, is refused (attach failure "usdt_notes"): each site is an uprobe.
  int attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name);
  // Same, for a file named in the config: attached whether or not a process maps it.
  int attach(const std::string& path);
  // After a full scan: files no process has mapped for `grace` are detached (FileLinks).
  void release_unmapped(const std::set<FileLinks::FileId>& mapped, std::chrono::milliseconds grace) {
    files_.release_unmapped(mapped, grace);
  }

  int allocators_fd() const;
  int blocks_fd() const;

 private:
  AgentStats& stats_;
  Skeleton<usdt_bpf> skel_;
  std::set<std::string> off_;  // "PROVIDER:NAME" not attached
  FileLinks files_;            // destroyed before the skeleton: declared after it
  std::unique_ptr<SetStatsSources> stats_sources_;
};

}  // namespace vigil::agent
