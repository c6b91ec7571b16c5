// Loads proc.bpf.c: process exec and exit events, handed to the agent as they arrive.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectors/agent_stats.h"
#include "probes/bpf_util.h"

struct proc_bpf;
struct ring_buffer;

namespace vigil::agent {

class ProcProbe {
 public:
  using Handler = std::function<void(uint32_t pid, bool exec)>;  // exec, or else exit
  ProcProbe(const std::string& btf_path, AgentStats& stats, Handler handler);  // throws
  ~ProcProbe();
  ProcProbe(const ProcProbe&) = delete;
  ProcProbe& operator=(const ProcProbe&) = delete;

  void consume();  // hands pending events to the handler, without waiting

 private:
  static int on_event(void* ctx, void* data, size_t size);
  struct SkelDeleter {
    void operator()(proc_bpf* s) const;
  };
  struct RingDeleter {
    void operator()(ring_buffer* r) const;
  };
  AgentStats& stats_;
  Handler handler_;
  std::unique_ptr<proc_bpf, SkelDeleter> skel_;
  std::unique_ptr<ring_buffer, RingDeleter> ring_;
  std::vector<Link> links_;
};

}  // namespace vigil::agent
