// The TCP set: tcp.bpf.c's tracepoints, exported per process and peer (tcp_*).
#include "sets/tcp_set.h"

#include "probes/pinned_state.h"

namespace vigil::agent {

TcpSet::TcpSet(SetContext& ctx)
    : probe_(ctx.cfg.kernel_btf, ctx.stats, ctx.cfg.probes.disabled_in("tcp"),
             set_pin_dir(ctx.cfg.bpf_pin_root, "tcp")),
      collector_(std::make_shared<TcpCollector>(probe_.peers_fd(), probe_.peer_counts_fd(), probe_.procs_fd(),
                                                ctx.cfg.tcp_top_peers,
                                                ctx.processes)) {}

std::vector<NamedCollector> TcpSet::collectors() { return {{"tcp", collector_}}; }

void TcpSet::expire() { collector_->expire(); }

}  // namespace vigil::agent
