// The links a probe set holds in each distinct file (device, inode). A file no process has mapped
// for a grace period is detached, so replaced or deleted copies (container churn, upgrades) do
// not pile up links, pinned inodes and, for USDT, libbpf's spec ids (a fixed pool per object:
// without release it runs out after a few dozen distinct files and every later attach fails).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "probes/bpf_util.h"
#include "stats/agent_stats.h"

namespace vigil::agent {

class FileLinks {
 public:
  using Clock = std::chrono::steady_clock;
  using FileId = std::pair<dev_t, ino_t>;

  struct File {
    std::string name;  // in logs
    std::vector<Link> links;
    bool pinned = false;  // named in the config: attached whether or not a process maps it
    int sites = 0;        // USDT sites attached: each may hold one of libbpf's spec ids
    std::string pin_dir;  // bpffs directory its links are pinned in ("": not pinned)
    Clock::time_point last_mapped;
  };

  FileLinks(std::string set, AgentStats& stats) : set_(std::move(set)), stats_(stats) {}
  ~FileLinks();
  FileLinks(const FileLinks&) = delete;
  FileLinks& operator=(const FileLinks&) = delete;

  // The file's entry, marked as mapped now, and whether it is new (nothing attached yet). The
  // caller attaches into `links` and counts them attached (AgentStats::add_attached).
  std::pair<File&, bool> seen(FileId id);
  // After a full scan: files none of `mapped` has been for `grace` are detached (logged, and
  // taken off the attached count).
  void release_unmapped(const std::set<FileId>& mapped, std::chrono::milliseconds grace);
  // USDT sites of the files held: an upper bound of the spec ids they use.
  int sites_held() const;
  // Lets pinned links outlive this object: without it libbpf's destroy disables their perf
  // events (bpf_link_perf_detach), and the pin would hold a link that no longer fires.
  void keep_pinned_links();

 private:
  std::string set_;
  AgentStats& stats_;
  std::map<FileId, File> files_;
};

}  // namespace vigil::agent
