// Per-process labels and liveness: labels are read once while the process lives so its series keep
// them during the grace period after it exits.
#include "discovery/process_table.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

namespace vigil::agent {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void ProcessTable::report_alive(uint32_t pid, Entry& e) {
  if (e.reported || e.exited || !recording_) return;
  e.reported = true;
  changes_.push_back({pid, true});
}

void ProcessTable::record_changes(bool on) {
  std::lock_guard lock(mu_);
  recording_ = on;
  if (!on) changes_.clear();
}

std::vector<ProcessTable::Change> ProcessTable::take_changes() {
  std::lock_guard lock(mu_);
  return std::exchange(changes_, {});
}

ProcessLabels ProcessTable::labels(uint32_t pid) {
  std::lock_guard lock(mu_);
  auto& e = entries_[pid];
  if (!e.have_labels) {
    std::string base = proc_root_ + "/" + std::to_string(pid);
    std::string comm = read_text_file(base + "/comm");
    if (!comm.empty()) {
      if (comm.back() == '\n') comm.pop_back();
      e.labels.comm = comm;
      e.labels.identity = parse_cgroup(read_text_file(base + "/cgroup"));
      if (pod_names_) e.labels.names = pod_names_->lookup(e.labels.identity.container_id);
      e.have_labels = true;
      report_alive(pid, e);
    }
  }
  return e.labels;
}

size_t ProcessTable::size() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void ProcessTable::mark_exited(uint32_t pid) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(pid);
  if (it == entries_.end() || it->second.exited) return;  // not one of ours, or already
  it->second.exited = true;
  it->second.gone = true;
  it->second.gone_since = Clock::now();
}

void ProcessTable::mark_exec(uint32_t pid) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(pid);
  if (it == entries_.end()) return;
  if (it->second.reported && recording_) changes_.push_back({pid, false});
  entries_.erase(it);
}

bool ProcessTable::expired(uint32_t pid) {
  struct stat st{};
  bool alive = stat((proc_root_ + "/" + std::to_string(pid)).c_str(), &st) == 0;
  std::lock_guard lock(mu_);
  auto& e = entries_[pid];
  if (e.exited) alive = false;
  if (alive) {
    report_alive(pid, e);
    e.gone = false;
    return false;
  }
  auto now = Clock::now();
  if (!e.gone) {
    e.gone = true;
    e.gone_since = now;
  }
  if (now - e.gone_since < grace_) return false;
  e.expired = true;
  return true;
}

void ProcessTable::sweep() {
  std::lock_guard lock(mu_);
  std::erase_if(entries_, [this](const auto& kv) {
    if (kv.second.expired && kv.second.reported && recording_) changes_.push_back({kv.first, false});
    return kv.second.expired;
  });
}

}  // namespace vigil::agent
