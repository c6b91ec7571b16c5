// Which processes' maps to scan for probed libraries, and when. Libraries dlopen'ed after the
// exec scans end are found by the next full scan.
#include "discovery/library_watch.h"

#include <signal.h>

#include <cerrno>

namespace vigil::agent {

void LibraryWatch::on_exec(uint32_t pid) {
  std::lock_guard lock(mu_);
  exec_scans_[pid] = Clock::now() + kExecScanFor;
}

void LibraryWatch::on_exit(uint32_t pid) {
  std::lock_guard lock(mu_);
  exec_scans_.erase(pid);
}

uint64_t LibraryWatch::pending_exec_scans() {
  std::lock_guard lock(mu_);
  return static_cast<uint64_t>(exec_scans_.size());
}

LibraryWatch::Scan LibraryWatch::scan() {
  auto now = Clock::now();
  Scan out;
  out.full = !exec_events_ || now >= next_full_scan_;
  LibraryScanner::Result found;
  if (out.full) {
    scanner_.scan(0, found);
    scanner_.retain(found.mapped);
    next_full_scan_ = now + full_interval_;
  }
  // Processes that exec'd recently: scanned (unless the full scan just did) without the lock,
  // since the ring reader adds execs meanwhile. Exits of processes the table does not hold are
  // not sent (bpf/proc.bpf.c), so one found gone is dropped here (kill(pid, 0): no path walk).
  std::vector<std::pair<uint32_t, Clock::time_point>> pids, done;  // pid, scan until
  {
    std::lock_guard lock(mu_);
    pids.assign(exec_scans_.begin(), exec_scans_.end());
  }
  for (const auto& [pid, until] : pids) {
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      done.emplace_back(pid, until);
      continue;
    }
    if (!out.full) scanner_.scan(pid, found);
    if (now >= until) done.emplace_back(pid, until);
  }
  out.hits = std::move(found.opened);
  if (out.full) out.mapped = std::move(found.mapped);
  std::lock_guard lock(mu_);
  for (const auto& [pid, until] : done) {
    auto it = exec_scans_.find(pid);
    if (it != exec_scans_.end() && it->second == until) exec_scans_.erase(it);  // else exec'd again since
  }
  return out;
}

}  // namespace vigil::agent
