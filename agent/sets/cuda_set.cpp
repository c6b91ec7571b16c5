// The CUDA set. Loaded, it has nothing to watch until a libcuda is found: that is not an error.
#include "sets/cuda_set.h"

#include <cstdio>
#include <stdexcept>

#include "probes/pinned_state.h"

namespace vigil::agent {
namespace {

// The set's pin directory; without one (no bpffs, pinning off) it counts from its own start.
std::string cuda_pin_dir(const Config& cfg) {
  if (cfg.bpf_pin_root.empty()) return "";
  try {
    return make_pin_dir(cfg.bpf_pin_root, "cuda");
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "vigil-agent: cuda: state not pinned, a restart loses it: %s\n", e.what());
    return "";
  }
}

}  // namespace

CudaSet::CudaSet(SetContext& ctx)
    : processes_(ctx.processes),
      grace_(ctx.cfg.grace_period),
      probe_(ctx.cfg.kernel_btf, ctx.stats, ctx.cfg.probes.disabled_in("cuda"), cuda_pin_dir(ctx.cfg)),
      maps_(probe_.procs_fd(), probe_.errors_fd(), probe_.live_fd(), probe_.handles_fd()) {
  memory_ = std::make_shared<GpuMemoryCollector>(maps_, ctx.cfg.fragmentation_window, ctx.processes,
                                                 probe_.accounting_since_ns());
  graphs_ = std::make_shared<CudaGraphCollector>(maps_, ctx.processes);
  for (const auto& path : ctx.cfg.libraries.cuda) probe_.attach_pinned(path);
  probe_.add_rings(ctx.rings);  // last: a constructor that throws leaves no callback behind
}

std::vector<NamedCollector> CudaSet::collectors() { return {{"gpu_memory", memory_}, {"cuda_graph", graphs_}}; }

void CudaSet::on_library(const LibraryHit& hit) {
  if (hit.kind == LibraryKind::kCuda) probe_.attach(hit.file.path(), hit.dev, hit.inode, hit.name);
}

void CudaSet::on_full_scan(const std::vector<LibraryHit>& mapped) {
  probe_.release_unmapped(files_of_kind(mapped, LibraryKind::kCuda), grace_);
  // The first full scan's libraries are attached after it (on_library): from the second on,
  // every mapped libcuda has this agent's probes and the previous agents' can go.
  if (++full_scans_ == 2) probe_.release_previous_links();
}

// A process gone past its grace: the collector keeps what it retires, then its kernel state goes.
// The fragmentation window is sampled here too, once per tick, from the same snapshot.
void CudaSet::expire() {
  CudaSnapshot snapshot = maps_.read();
  for (auto it = snapshot.procs.begin(); it != snapshot.procs.end();) {
    if (!processes_.expired(it->first)) {
      ++it;
      continue;
    }
    memory_->retire(it->first, it->second);
    maps_.forget(it->first);
    it = snapshot.procs.erase(it);
  }
  memory_->sample(snapshot);
}

}  // namespace vigil::agent
