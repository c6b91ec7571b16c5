// Which processes' maps to scan for probed libraries on a housekeeping tick: all of them every
// discovery interval (every tick without exec events), and a process that just exec'd on every
// tick for a few seconds (the dynamic linker maps its libraries after exec).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "discovery/library_scanner.h"

namespace vigil::agent {

class LibraryWatch {
 public:
  using Clock = std::chrono::steady_clock;

  LibraryWatch(std::string proc_root, std::chrono::milliseconds full_interval, AgentStats& stats)
      : scanner_(std::move(proc_root), &stats), full_interval_(full_interval) {}

  // Exec and exit events arrive (the proc set): full scans only every full_interval, exec'd
  // processes in between. Without them every scan is a full one: slower to run, as quick to find.
  void set_exec_events(bool on) { exec_events_ = on; }
  // A process exec'd or exited; from the ring reader's thread.
  void on_exec(uint32_t pid);
  void on_exit(uint32_t pid);

  struct Scan {
    std::vector<LibraryHit> hits;    // files found since the last scan, open until Scan goes
    std::vector<LibraryHit> mapped;  // on a full scan: every file any process maps (not open)
    bool full = false;
  };
  // The libraries to attach now (housekeeping thread).
  Scan scan();
  // Processes to be scanned on the coming ticks.
  uint64_t pending_exec_scans();

 private:
  // How long a process that exec'd is scanned on every tick.
  static constexpr auto kExecScanFor = std::chrono::seconds(3);

  LibraryScanner scanner_;  // housekeeping thread only
  std::chrono::milliseconds full_interval_;
  bool exec_events_ = false;
  Clock::time_point next_full_scan_{};
  std::mutex mu_;  // guards exec_scans_ (ring reader adds, housekeeping scans and removes)
  std::map<uint32_t, Clock::time_point> exec_scans_;  // pid -> scan until
};

}  // namespace vigil::agent
