// Loads tcp.bpf.c and attaches its tracepoints; a tracepoint that is missing is skipped and counted.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "probes/bpf_util.h"
#include "probes/pinned_links.h"
#include "stats/agent_stats.h"

struct tcp_bpf;

namespace vigil::agent {

class TcpProbe {
 public:
  // Throws std::runtime_error when the object cannot be loaded at all. `off`: tracepoints not to
  // attach (names()). `pin_dir`: the bpffs directory its maps and links are pinned in and reused
  // from ("": not pinned).
  TcpProbe(const std::string& btf_path, AgentStats& stats, const std::set<std::string>& off = {},
           const std::string& pin_dir = "");
  // The tracepoints it attaches, as probes.disable names them (tcp_sendmsg_locked, ...).
  static std::vector<std::string> names();
  ~TcpProbe();
  TcpProbe(const TcpProbe&) = delete;
  TcpProbe& operator=(const TcpProbe&) = delete;

  int peers_fd() const;
  int peer_counts_fd() const;
  int procs_fd() const;
  int conns_fd() const;  // both ends of connections (correlation)

 private:
  std::vector<const bpf_map*> tables() const;
  // Opens and loads tcp.bpf.o with its maps pinned in PIN_DIR ("": none); 0 or a libbpf error.
  int load(const std::string& btf_path, const std::set<std::string>& off, const std::string& pin_dir);
  struct SkelDeleter {
    void operator()(tcp_bpf* s) const;
  };
  std::unique_ptr<tcp_bpf, SkelDeleter> skel_;
  std::unique_ptr<PinnedLinks> links_;  // destroyed before the skeleton: declared after it
  AgentStats& stats_;
  int missing_ = 0;  // tracepoints this kernel's BTF lacks (no fallback)
};

}  // namespace vigil::agent
