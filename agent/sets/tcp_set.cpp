// The TCP set: tcp.bpf.c's tracepoints, exported per process and peer (tcp_*).
#include "sets/tcp_set.h"

#include "probes/pinned_state.h"

namespace vigil::agent {

TcpSet::TcpSet(SetContext& ctx)
    : processes_(ctx.processes),
      probe_(ctx.cfg.kernel_btf, ctx.stats, ctx.cfg.probes.disabled_in("tcp"),
             set_pin_dir(ctx.cfg.bpf_pin_root, "tcp")),
      maps_(probe_.peers_fd(), probe_.peer_counts_fd(), probe_.procs_fd(), probe_.retrans_settled_fd()),
      connections_(probe_.conns_fd()),
      collector_(std::make_shared<TcpCollector>(maps_, ctx.cfg.tcp_top_peers, ctx.processes)) {}

std::vector<NamedCollector> TcpSet::collectors() { return {{"tcp", collector_}}; }

// Processes gone past their grace: the collector keeps their resets, then their kernel state goes.
void TcpSet::expire() {
  const TcpSnapshot snapshot = maps_.read();
  std::set<uint32_t> dead;
  for (const auto& [pid, rows] : snapshot.peers)
    if (pid != 0 && processes_.expired(pid)) dead.insert(pid);
  for (const auto& [pid, state] : snapshot.timers)
    if (pid != 0 && processes_.expired(pid)) dead.insert(pid);
  collector_->retire(snapshot, dead);
  maps_.forget(dead);
}

}  // namespace vigil::agent
