// Loads tcp.bpf.c and attaches its tracepoints; a tracepoint that is missing is skipped and counted.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "probes/bpf_util.h"
#include "probes/pinned_links.h"
#include "probes/skeleton.h"
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
  int retrans_settled_fd() const;  // segments counted at close (per CPU)

 private:
  // Sets which programs load: the tp_btf ones the kernel has, else their fallbacks; none in OFF.
  void choose_programs(tcp_bpf& skel, const std::string& btf_path, const std::set<std::string>& off);
  AgentStats& stats_;
  int missing_ = 0;  // tracepoints this kernel's BTF lacks (no fallback)
  Skeleton<tcp_bpf> skel_;
  std::unique_ptr<PinnedLinks> links_;  // destroyed before the skeleton: declared after it
  std::unique_ptr<SetStatsSources> stats_sources_;  // unregistered before the links go
};

}  // namespace vigil::agent
