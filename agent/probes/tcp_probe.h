// Loads tcp.bpf.c and attaches its tracepoints; a tracepoint that is missing is skipped and counted.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "probes/bpf_util.h"
#include "stats/agent_stats.h"

struct tcp_bpf;

namespace vigil::agent {

class TcpProbe {
 public:
  // Throws std::runtime_error when the object cannot be loaded at all.
  TcpProbe(const std::string& btf_path, AgentStats& stats);
  ~TcpProbe();
  TcpProbe(const TcpProbe&) = delete;
  TcpProbe& operator=(const TcpProbe&) = delete;

  int peers_fd() const;
  int procs_fd() const;
  int conns_fd() const;  // both ends of connections (correlation)

 private:
  std::vector<const bpf_map*> tables() const;
  struct SkelDeleter {
    void operator()(tcp_bpf* s) const;
  };
  std::unique_ptr<tcp_bpf, SkelDeleter> skel_;
  std::vector<Link> links_;  // destroyed before the skeleton: declared after it
  AgentStats& stats_;
};

}  // namespace vigil::agent
