// Per-process labels (comm, container, pod) and liveness with a grace period after exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

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
  // Called (under the table's lock, so calls for one pid arrive in order) when an entry of a
  // live process is made (true: seen alive in /proc) and when that entry goes (false); the agent
  // mirrors the table into the kernel with it. Entries made for a process already gone (a series
  // that outlived its process) are not reported: no exit is to come.
  void set_on_change(std::function<void(uint32_t pid, bool present)> on_change);
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
    bool reported = false;  // on_change_(pid, true) called
  };
  std::string proc_root_;
  std::chrono::milliseconds grace_;
  std::mutex mu_;
  std::map<uint32_t, Entry> entries_;
  std::function<void(uint32_t, bool)> on_change_;
  PodNameIndex* pod_names_ = nullptr;
  void report_alive(uint32_t pid, Entry& e);  // mu_ held
};

// Reads a small /proc text file whole; empty when unreadable.
std::string read_text_file(const std::string& path);

}  // namespace vigil::agent
