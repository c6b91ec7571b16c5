// Attaches one entry and one return program to a list of functions of a shared library, once per
// distinct file (device, inode), with the function's id as the BPF cookie.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "probes/bpf_util.h"
#include "probes/file_links.h"
#include "stats/agent_stats.h"

namespace vigil::agent {

struct UprobeTarget {
  const char* symbol;
  uint64_t cookie;
  bool optional;  // absent in some versions (_ptsz variants, old names): not a failure
};

class UprobeSet {
 public:
  UprobeSet(std::string set, bpf_program* enter, bpf_program* exit,
            std::vector<UprobeTarget> targets, AgentStats& stats)
      : set_(std::move(set)), enter_(enter), exit_(exit), targets_(std::move(targets)), stats_(stats),
        files_(set_, stats) {}
  ~UprobeSet() { files_.keep_pinned_links(); }
  UprobeSet(const UprobeSet&) = delete;
  UprobeSet& operator=(const UprobeSet&) = delete;

  using FileId = FileLinks::FileId;

  // Pins every link made from now on under SET_DIR/links/<this agent's start, boot ns>/<dev>_<inode>/
  // <symbol>_entry|_return, so the kernel keeps running them after this object (and the agent) is
  // gone. The previous agents' directories there keep their links running until
  // release_previous_links; their programs share the set's pinned maps with this one's.
  void adopt_pinned_links(const std::string& set_dir);
  // Removes the links previous agents pinned (they ran beside this one's meanwhile, so no call was
  // missed); call once this agent has attached to every mapped library.
  void release_previous_links();

  // Attaches every target in the library at PATH unless (dev, inode) is attached already;
  // returns the number of links made. Missing required symbols count as attach failures. PATH
  // is only used during the call (the links hold the inode); NAME is the library in logs.
  int attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name);
  // Same, identifying the file by stat(PATH); a library named in the config stays attached
  // whether or not a process maps it (pinned).
  int attach_pinned(const std::string& path);
  // After a full scan: libraries no process has mapped for `grace` are detached, so replaced
  // or deleted copies (container churn, upgrades) do not pile up links.
  void release_unmapped(const std::set<FileId>& mapped, std::chrono::milliseconds grace) {
    files_.release_unmapped(mapped, grace);
  }

 private:
  bool attach_one(FileLinks::File& lib, const std::string& path, const UprobeTarget& t, bool retprobe);
  void pin(FileLinks::File& lib, bpf_link* link, const UprobeTarget& t, bool retprobe);

  std::string set_;
  bpf_program* enter_;
  bpf_program* exit_;
  std::vector<UprobeTarget> targets_;
  AgentStats& stats_;
  FileLinks files_;
  std::string pin_dir_;
  std::vector<std::string> previous_links_;  // link directories of previous agents
};

}  // namespace vigil::agent
