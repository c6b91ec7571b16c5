// The collective set: failed collectives of the worker, from its USDT probes, to the correlator.
#include "sets/collective_set.h"

#include <stdexcept>

#include "probes/pinned_state.h"
#include "sets/correlation_set.h"

namespace vigil::agent {
namespace {

Correlator& correlator_of(const LoadedSets& loaded) {
  CorrelationSet* correlation = loaded.find<CorrelationSet>();
  if (!correlation) throw std::logic_error("collective needs the correlation set");
  return correlation->correlator();
}

}  // namespace

CollectiveSet::CollectiveSet(SetContext& ctx)
    : grace_(ctx.cfg.grace_period),
      correlator_(correlator_of(ctx.loaded)),
      probe_(ctx.cfg.kernel_btf, ctx.stats,
             [this](const collective_failure& f) { correlator_.on_collective_failure(f); },
             set_pin_dir(ctx.cfg.bpf_pin_root, "collective")) {
  correlator_.set_collective_procs_fd(probe_.procs_fd());
  for (const auto& path : ctx.cfg.libraries.usdt) probe_.attach(path);
  probe_.add_rings(ctx.rings);  // last: a constructor that throws leaves no callback behind
}

void CollectiveSet::on_library(const LibraryHit& hit) {
  if (hit.kind == LibraryKind::kUsdt) probe_.attach(hit.file.path(), hit.dev, hit.inode, hit.name);
}

void CollectiveSet::on_full_scan(const std::vector<LibraryHit>& mapped) {
  probe_.release_unmapped(files_of_kind(mapped, LibraryKind::kUsdt), grace_);
}

}  // namespace vigil::agent
