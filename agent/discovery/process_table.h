// Per-process labels (comm, container, pod) and liveness with a grace period after exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "discovery/cgroup.h"

namespace vigil::agent {

struct ProcessLabels {
  std::string comm;
  ContainerIdentity identity;
};

class ProcessTable {
 public:
  using Clock = std::chrono::steady_clock;
  ProcessTable(std::string proc_root, std::chrono::milliseconds grace)
      : proc_root_(std::move(proc_root)), grace_(grace) {}

  // Labels for PID, read from /proc once and kept past the process's exit.
  ProcessLabels labels(uint32_t pid);
  // True once PID has been gone from /proc for longer than the grace period: its series and
  // kernel state should be dropped. Every collector asking during the same tick gets true.
  bool expired(uint32_t pid);
  // A process exited (its exit event): its grace period starts now, zombie or not.
  void mark_exited(uint32_t pid);
  // A process exec'd: a new program, so its labels (comm) are read again.
  void mark_exec(uint32_t pid);
  // Starts a housekeeping tick: forgets the processes found expired during the previous one.
  void sweep();
  size_t size();

 private:
  struct Entry {
    ProcessLabels labels;
    bool have_labels = false;
    Clock::time_point gone_since{};
    bool gone = false;
    bool expired = false;
    bool exited = false;  // seen exiting: /proc may still show it as a zombie
  };
  std::string proc_root_;
  std::chrono::milliseconds grace_;
  std::mutex mu_;
  std::map<uint32_t, Entry> entries_;
};

// Reads a small /proc text file whole; empty when unreadable.
std::string read_text_file(const std::string& path);

}  // namespace vigil::agent
