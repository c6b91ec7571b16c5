// The NCCL set. Loaded, it has nothing to watch until a libnccl is found: that is not an error.
#include "sets/nccl_set.h"

#include "probes/pinned_state.h"

namespace vigil::agent {

NcclSet::NcclSet(SetContext& ctx)
    : processes_(ctx.processes),
      grace_(ctx.cfg.grace_period),
      probe_(ctx.cfg.kernel_btf, ctx.stats, ctx.cfg.probes.disabled_in("nccl"), set_pin_dir(ctx.cfg.bpf_pin_root, "nccl")),
      maps_(probe_.procs_fd(), probe_.comms_fd(), probe_.calls_fd(), probe_.async_errors_fd()) {
  collector_ = std::make_shared<NcclCollector>(maps_, ctx.processes);
  for (const auto& path : ctx.cfg.libraries.nccl) probe_.attach_pinned(path);
  probe_.add_rings(ctx.rings);  // last: a constructor that throws leaves no callback behind
}

std::vector<NamedCollector> NcclSet::collectors() { return {{"nccl", collector_}}; }

void NcclSet::on_library(const LibraryHit& hit) {
  if (hit.kind == LibraryKind::kNccl) probe_.attach(hit.file.path(), hit.dev, hit.inode, hit.name);
}

void NcclSet::on_full_scan(const std::vector<LibraryHit>& mapped) {
  probe_.release_unmapped(files_of_kind(mapped, LibraryKind::kNccl), grace_);
  // As CudaSet: from the second full scan on, every mapped libnccl has this agent's probes.
  if (++full_scans_ == 2) probe_.release_previous_links();
}

// Processes gone past their grace: their kernel state goes (the collector keeps nothing of them).
void NcclSet::expire() {
  std::set<uint32_t> dead;
  for (const auto& [pid, p] : maps_.read(kNcclProcs).procs)
    if (processes_.expired(pid)) dead.insert(pid);
  maps_.forget(dead);
}

}  // namespace vigil::agent
