// The proc set: proc.bpf.c's exec and exit events, for discovery (a process is scanned as it
// execs) and the process table (an exit starts the grace period at once). No config switch:
// it is loaded when a set watches libraries.
#pragma once

#include <cstdint>
#include <memory>

#include "probes/proc_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class ProcSet : public ProbeSet {
 public:
  // The set, or nullptr after logging why it could not load: without the events discovery
  // scans every process on every tick, which is slower, not blind.
  static std::unique_ptr<ProbeSet> load(SetContext& ctx);

  explicit ProcSet(SetContext& ctx);
  ~ProcSet() override;
  ProcSet(const ProcSet&) = delete;
  ProcSet& operator=(const ProcSet&) = delete;
  // Within 50 ms of a process entering the table its exit is tracked (an exit missed meanwhile
  // is found by the /proc check); expire runs after the table's sweep, which withdraws entries.
  void poll() override { mirror_changes(); }
  void expire() override { mirror_changes(); }

 private:
  void mirror_changes();
  void on_event(uint32_t pid, bool exec);  // the ring reader's thread

  ProcessTable& processes_;
  LibraryWatch& libraries_;
  ProcProbe probe_;
};

}  // namespace vigil::agent
