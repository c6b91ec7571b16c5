// The USDT set. PyTorch's probes say what its allocator hands out; what it reserves comes from the
// CUDA set's driver probes of the same process, when that set is loaded.
#include "sets/usdt_set.h"

#include <set>

#include "probes/pinned_state.h"
#include "sets/cuda_set.h"

namespace vigil::agent {

UsdtSet::UsdtSet(SetContext& ctx)
    : processes_(ctx.processes),
      grace_(ctx.cfg.grace_period),
      probe_(ctx.cfg.kernel_btf, ctx.stats, ctx.cfg.probes.disabled_in("usdt"), set_pin_dir(ctx.cfg.bpf_pin_root, "usdt")),
      maps_(probe_.allocators_fd(), probe_.blocks_fd()) {
  const CudaSet* cuda = ctx.loaded.find<CudaSet>();
  allocators_ = std::make_shared<AllocatorCollector>(maps_, cuda ? &cuda->maps() : nullptr, ctx.processes);
  for (const auto& path : ctx.cfg.libraries.usdt) probe_.attach(path);
}

std::vector<NamedCollector> UsdtSet::collectors() { return {{"allocator", allocators_}}; }

void UsdtSet::on_library(const LibraryHit& hit) {
  if (hit.kind == LibraryKind::kUsdt) probe_.attach(hit.file.path(), hit.dev, hit.inode, hit.name);
}

void UsdtSet::on_full_scan(const std::vector<LibraryHit>& mapped) {
  probe_.release_unmapped(files_of_kind(mapped, LibraryKind::kUsdt), grace_);
}

// The allocator collector keeps no state of its own: a process gone past its grace is forgotten.
void UsdtSet::expire() {
  std::set<uint32_t> gone;
  for (const auto& [k, s] : maps_.read().allocators)
    if (gone.count(k.tgid) || processes_.expired(k.tgid)) gone.insert(k.tgid);
  maps_.forget(gone);
}

}  // namespace vigil::agent
