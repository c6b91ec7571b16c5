// Loads proc.bpf.c: process exec and exit events, handed to the agent as they arrive. Exits are
// sent only for the processes marked with track().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "probes/bpf_util.h"
#include "probes/pinned_links.h"
#include "probes/ring_reader.h"
#include "probes/skeleton.h"
#include "stats/agent_stats.h"

struct proc_bpf;

namespace vigil::agent {

class ProcProbe {
 public:
  using Handler = std::function<void(uint32_t pid, bool exec)>;  // exec, or else exit
  // `pin_dir`: the bpffs directory its maps (the event ring included: what no agent read yet, the
  // next one reads; what did not fit is counted as dropped) and links are pinned in ("": none).
  ProcProbe(const std::string& btf_path, AgentStats& stats, Handler handler,
            const std::string& pin_dir = "");  // throws
  ~ProcProbe();
  ProcProbe(const ProcProbe&) = delete;
  ProcProbe& operator=(const ProcProbe&) = delete;

  // Registers the event ring with `reader`; the handler then runs on the reader's thread.
  void add_rings(RingReader& reader);
  // Adds (on) or removes PID from the processes whose exit the kernel sends. Thread-safe.
  void track(uint32_t pid, bool on);

 private:
  static int on_event(void* ctx, void* data, size_t size);
  AgentStats& stats_;
  Handler handler_;
  Skeleton<proc_bpf> skel_;
  std::unique_ptr<PinnedLinks> links_;  // destroyed before the skeleton: declared after it
  std::unique_ptr<SetStatsSources> stats_sources_;  // reads the links: unregistered first
};

}  // namespace vigil::agent
