// The TCP set: tcp.bpf.c's tracepoints, exported per process and peer (tcp_*).
#include "sets/tcp_set.h"

namespace vigil::agent {

TcpSet::TcpSet(SetContext& ctx)
    : probe_(ctx.cfg.kernel_btf, ctx.stats, ctx.cfg.probes.disabled_in("tcp")),
      collector_(std::make_shared<TcpCollector>(probe_.peers_fd(), probe_.peer_counts_fd(), probe_.procs_fd(),
                                                ctx.cfg.tcp_top_peers,
                                                ctx.processes)) {}

std::vector<NamedCollector> TcpSet::collectors() { return {{"tcp", collector_}}; }

void TcpSet::expire() { collector_->expire(); }

}  // namespace vigil::agent
