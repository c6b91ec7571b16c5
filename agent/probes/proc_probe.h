// Loads proc.bpf.c: process exec and exit events, handed to the agent as they arrive. Exits are
// sent only for the processes marked with track().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "probes/bpf_util.h"
#include "probes/ring_reader.h"
#include "stats/agent_stats.h"

struct proc_bpf;

namespace vigil::agent {

class ProcProbe {
 public:
  using Handler = std::function<void(uint32_t pid, bool exec)>;  // exec, or else exit
  ProcProbe(const std::string& btf_path, AgentStats& stats, Handler handler);  // throws
  ~ProcProbe();
  ProcProbe(const ProcProbe&) = delete;
  ProcProbe& operator=(const ProcProbe&) = delete;

  // Registers the event ring with `reader`; the handler then runs on the reader's thread.
  void add_rings(RingReader& reader);
  // Adds (on) or removes PID from the processes whose exit the kernel sends. Thread-safe.
  void track(uint32_t pid, bool on);

 private:
  static int on_event(void* ctx, void* data, size_t size);
  struct SkelDeleter {
    void operator()(proc_bpf* s) const;
  };
  AgentStats& stats_;
  Handler handler_;
  std::unique_ptr<proc_bpf, SkelDeleter> skel_;
  std::vector<Link> links_;
};

}  // namespace vigil::agent
