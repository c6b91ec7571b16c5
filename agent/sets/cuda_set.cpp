// The CUDA set. Loaded, it has nothing to watch until a libcuda is found: that is not an error.
#include "sets/cuda_set.h"

namespace vigil::agent {

CudaSet::CudaSet(SetContext& ctx) : grace_(ctx.cfg.grace_period), probe_(ctx.cfg.kernel_btf, ctx.stats, ctx.cfg.probes.disabled_in("cuda")) {
  memory_ = std::make_shared<GpuMemoryCollector>(probe_.procs_fd(), probe_.errors_fd(), probe_.live_fd(),
                                                 probe_.handles_fd(), ctx.cfg.fragmentation_window, ctx.processes);
  graphs_ = std::make_shared<CudaGraphCollector>(probe_.procs_fd(), probe_.errors_fd(), ctx.processes);
  for (const auto& path : ctx.cfg.libraries.cuda) probe_.attach_pinned(path);
  probe_.add_rings(ctx.rings);  // last: a constructor that throws leaves no callback behind
}

std::vector<NamedCollector> CudaSet::collectors() { return {{"gpu_memory", memory_}, {"cuda_graph", graphs_}}; }

void CudaSet::on_library(const LibraryHit& hit) {
  if (hit.kind == LibraryKind::kCuda) probe_.attach(hit.file.path(), hit.dev, hit.inode, hit.name);
}

void CudaSet::on_full_scan(const std::vector<LibraryHit>& mapped) {
  probe_.release_unmapped(files_of_kind(mapped, LibraryKind::kCuda), grace_);
}

// The fragmentation window is sampled here too, once per tick.
void CudaSet::expire() { memory_->sample(); }

}  // namespace vigil::agent
