// NCCL/TCP correlation: no probes of its own (method and limits: docs/correlation.md).
#include "sets/correlation_set.h"

#include <stdexcept>

#include "sets/nccl_set.h"
#include "sets/tcp_set.h"

namespace vigil::agent {

CorrelationSet::CorrelationSet(SetContext& ctx) {
  const TcpSet* tcp = ctx.loaded.find<TcpSet>();
  if (!tcp) throw std::logic_error("correlation needs the tcp set");
  const NcclSet* nccl = ctx.loaded.find<NcclSet>();
  correlator_ = std::make_shared<Correlator>(tcp->conns_fd(), nccl ? nccl->procs_fd() : -1,
                                             nccl ? nccl->async_errors_fd() : -1, ctx.cfg.collective_timeout,
                                             ctx.cfg.tcp_top_peers, ctx.processes);
}

std::vector<NamedCollector> CorrelationSet::collectors() { return {{"correlation", correlator_}}; }

void CorrelationSet::expire() { correlator_->expire(); }

void CorrelationSet::poll() { correlator_->poll_nccl(); }

}  // namespace vigil::agent
