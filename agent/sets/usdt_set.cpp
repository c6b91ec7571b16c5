// The USDT set. PyTorch's probes say what its allocator hands out; what it reserves comes from the
// CUDA set's driver probes of the same process, when that set is loaded.
#include "sets/usdt_set.h"

#include "probes/pinned_state.h"
#include "sets/cuda_set.h"

namespace vigil::agent {

UsdtSet::UsdtSet(SetContext& ctx) : grace_(ctx.cfg.grace_period), probe_(ctx.cfg.kernel_btf, ctx.stats, ctx.cfg.probes.disabled_in("usdt"),
             set_pin_dir(ctx.cfg.bpf_pin_root, "usdt")) {
  const CudaSet* cuda = ctx.loaded.find<CudaSet>();
  allocators_ = std::make_shared<AllocatorCollector>(probe_.allocators_fd(), probe_.blocks_fd(),
                                                     cuda ? cuda->procs_fd() : -1, ctx.processes);
  for (const auto& path : ctx.cfg.libraries.usdt) probe_.attach(path);
}

std::vector<NamedCollector> UsdtSet::collectors() { return {{"allocator", allocators_}}; }

void UsdtSet::on_library(const LibraryHit& hit) {
  if (hit.kind == LibraryKind::kUsdt) probe_.attach(hit.file.path(), hit.dev, hit.inode, hit.name);
}

void UsdtSet::on_full_scan(const std::vector<LibraryHit>& mapped) {
  probe_.release_unmapped(files_of_kind(mapped, LibraryKind::kUsdt), grace_);
}

void UsdtSet::expire() { allocators_->expire(); }

}  // namespace vigil::agent
