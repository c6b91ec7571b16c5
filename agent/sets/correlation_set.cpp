// NCCL/TCP correlation: no probes of its own (method and limits: docs/correlation.md).
#include "sets/correlation_set.h"

#include <stdexcept>

#include "sets/collective_set.h"
#include "sets/nccl_set.h"
#include "sets/tcp_set.h"

namespace vigil::agent {

CorrelationSet::CorrelationSet(SetContext& ctx) {
  const TcpSet* tcp = ctx.loaded.find<TcpSet>();
  if (!tcp) throw std::logic_error("correlation needs the tcp set");
  const NcclSet* nccl = ctx.loaded.find<NcclSet>();
  CollectiveSet* collective = ctx.loaded.find<CollectiveSet>();
  correlator_ = std::make_shared<Correlator>(tcp->connections(), nccl ? &nccl->maps() : nullptr,
                                             collective ? &collective->maps() : nullptr, ctx.cfg.collective_timeout,
                                             ctx.cfg.tcp_top_peers, ctx.processes);
  // The sink shares the correlator: the collective set, unloaded after this one, may outlive it.
  if (collective)
    collective->send_failures_to(
        [correlator = correlator_](const collective_failure& f) { correlator->on_collective_failure(f); });
}

std::vector<NamedCollector> CorrelationSet::collectors() { return {{"correlation", correlator_}}; }

void CorrelationSet::expire() { correlator_->expire(); }

void CorrelationSet::poll() { correlator_->poll_nccl(); }

}  // namespace vigil::agent
