// The collective set: failed collectives of the worker, from its USDT probes, to the correlator;
// each worker's tensor-parallel progress to /metrics.
#include "sets/collective_set.h"

#include "probes/pinned_state.h"

namespace vigil::agent {

CollectiveSet::CollectiveSet(SetContext& ctx)
    : processes_(ctx.processes),
      grace_(ctx.cfg.grace_period),
      probe_(ctx.cfg.kernel_btf, ctx.stats,
             [this](const collective_failure& f) {
               std::lock_guard lock(sink_mu_);
               if (sink_) sink_(f);
             },
             set_pin_dir(ctx.cfg.bpf_pin_root, "collective")),
      maps_(probe_.procs_fd(), probe_.groups_fd()) {
  collector_ = std::make_shared<TpGroupCollector>(maps_, ctx.processes);
  for (const auto& path : ctx.cfg.libraries.usdt) probe_.attach(path);
  probe_.add_rings(ctx.rings);  // last: a constructor that throws leaves no callback behind
}

std::vector<NamedCollector> CollectiveSet::collectors() { return {{"tp_group", collector_}}; }

void CollectiveSet::send_failures_to(FailureSink sink) {
  std::lock_guard lock(sink_mu_);
  sink_ = std::move(sink);
}

void CollectiveSet::on_library(const LibraryHit& hit) {
  if (hit.kind == LibraryKind::kUsdt) probe_.attach(hit.file.path(), hit.dev, hit.inode, hit.name);
}

void CollectiveSet::on_full_scan(const std::vector<LibraryHit>& mapped) {
  probe_.release_unmapped(files_of_kind(mapped, LibraryKind::kUsdt), grace_);
}

// Processes gone past their grace: their kernel state goes (the correlator drops its own; the
// collector keeps nothing of them).
void CollectiveSet::expire() {
  std::set<uint32_t> dead;
  for (const auto& [pid, p] : maps_.read().procs)
    if (processes_.expired(pid)) dead.insert(pid);
  maps_.forget(dead);
}

}  // namespace vigil::agent
