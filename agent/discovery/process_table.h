// Per-process labels (comm, container, pod) and liveness with a grace period after exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "discovery/cgroup.h"
#include "discovery/pod_names.h"

namespace vigil::agent {

struct ProcessLabels {
  std::string comm;
  ContainerIdentity identity;
  PodNames names;  // the container's Kubernetes names, where the node knows them
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
  std::chrono::milliseconds grace() const { return grace_; }
  const std::string& proc_root() const { return proc_root_; }
  // A change of the table's live processes: an entry of a live process made (present: seen
  // alive in /proc) or that entry gone. Entries made for a process already gone (a series that
  // outlived its process) are not changes: no exit is to come.
  struct Change {
    uint32_t pid;
    bool present;
    bool operator==(const Change&) const = default;
  };
  // With ON, the table queues its changes for take_changes (the proc set mirrors them into the
  // kernel's `tracked` map from housekeeping: a scrape that reads labels never writes a map).
  void record_changes(bool on);
  // The changes queued since the last call, in order.
  std::vector<Change> take_changes();
  // Where a container id's namespace, pod and container names come from (none: labels stay empty).
  void set_pod_names(PodNameIndex* index) { pod_names_ = index; }

 private:
  struct Entry {
    ProcessLabels labels;
    bool have_labels = false;
    Clock::time_point gone_since{};
    bool gone = false;
    bool expired = false;
    bool exited = false;  // seen exiting: /proc may still show it as a zombie
    bool reported = false;  // queued as present
  };
  std::string proc_root_;
  std::chrono::milliseconds grace_;
  std::mutex mu_;
  std::map<uint32_t, Entry> entries_;
  bool recording_ = false;
  std::vector<Change> changes_;
  PodNameIndex* pod_names_ = nullptr;
  void report_alive(uint32_t pid, Entry& e);  // mu_ held
};

// Reads a small /proc text file whole; empty when unreadable.
std::string read_text_file(const std::string& path);

}  // namespace vigil::agent
