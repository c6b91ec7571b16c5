// The owner of collective.bpf.c's per-process maps on the user side: reads them into a snapshot
// for the correlator (each worker's collective timeout) and the group collector, and forgets
// exited processes. No other code walks or writes them.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <map>
#include <set>

#include "collective_events.h"

namespace vigil::agent {

struct CollectiveSnapshot {
  std::map<uint32_t, collective_proc> procs;    // by pid
  std::map<uint32_t, collective_group> groups;  // by pid: the workers in a tensor-parallel group
};

// What the correlator reads: the map, or a snapshot a unit test made.
class CollectiveReader {
 public:
  virtual ~CollectiveReader() = default;
  virtual CollectiveSnapshot read() const = 0;
};

class CollectiveMaps : public CollectiveReader {
 public:
  CollectiveMaps(int procs_fd, int groups_fd) : procs_fd_(procs_fd), groups_fd_(groups_fd) {}
  CollectiveSnapshot read() const override;
  void forget(const std::set<uint32_t>& pids) const;

 private:
  int procs_fd_, groups_fd_;
};

}  // namespace vigil::agent
