// Attaches one entry and one return program to a list of functions of a shared library, once per
// distinct file (device, inode), with the function's id as the BPF cookie.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "collectors/agent_stats.h"
#include "probes/bpf_util.h"

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
      : set_(std::move(set)), enter_(enter), exit_(exit), targets_(std::move(targets)), stats_(stats) {}
  ~UprobeSet();
  UprobeSet(const UprobeSet&) = delete;
  UprobeSet& operator=(const UprobeSet&) = delete;

  // Attaches every target in the library at PATH unless (dev, inode) is done already; returns
  // the number of links made. Missing required symbols are counted as attach failures.
  int attach(const std::string& path, dev_t dev, ino_t inode);
  // Same, identifying the file by stat(PATH).
  int attach(const std::string& path);
  size_t libraries() const { return done_.size(); }

 private:
  bool attach_one(const std::string& path, const UprobeTarget& t, bool retprobe);

  std::string set_;
  bpf_program* enter_;
  bpf_program* exit_;
  std::vector<UprobeTarget> targets_;
  AgentStats& stats_;
  std::set<std::pair<dev_t, ino_t>> done_;
  std::vector<Link> links_;
};

}  // namespace vigil::agent
