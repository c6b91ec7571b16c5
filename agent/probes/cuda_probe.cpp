// Loads cuda.bpf.c: one generic entry/return program pair, attached per driver entry point with
// the function id as cookie. Optional names (_ptsz variants, cuGraphInstantiate_v2) exist only in
// some driver versions.
#include "probes/cuda_probe.h"

#include <linux/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "cuda_events.h"
#include "cuda.skel.h"
#include "probes/cuda_result.h"
#include "probes/pinned_state.h"

namespace vigil::agent {
namespace {

std::vector<UprobeTarget> cuda_targets() {
  return {
      {"cuMemAlloc_v2", CUDA_FN_MEM_ALLOC, false},
      {"cuMemAllocPitch_v2", CUDA_FN_MEM_ALLOC_PITCH, false},
      {"cuMemAllocAsync", CUDA_FN_MEM_ALLOC_ASYNC, false},
      {"cuMemAllocAsync_ptsz", CUDA_FN_MEM_ALLOC_ASYNC, true},
      {"cuMemAllocFromPoolAsync", CUDA_FN_MEM_ALLOC_FROM_POOL, false},
      {"cuMemAllocFromPoolAsync_ptsz", CUDA_FN_MEM_ALLOC_FROM_POOL, true},
      {"cuMemAllocManaged", CUDA_FN_MEM_ALLOC_MANAGED, false},
      {"cuMemFree_v2", CUDA_FN_MEM_FREE, false},
      {"cuMemFreeAsync", CUDA_FN_MEM_FREE_ASYNC, false},
      {"cuMemFreeAsync_ptsz", CUDA_FN_MEM_FREE_ASYNC, true},
      {"cuMemCreate", CUDA_FN_MEM_CREATE, false},
      {"cuMemRelease", CUDA_FN_MEM_RELEASE, false},
      {"cuMemMap", CUDA_FN_MEM_MAP, false},
      {"cuMemUnmap", CUDA_FN_MEM_UNMAP, false},
      {"cuMemAddressReserve", CUDA_FN_MEM_ADDRESS_RESERVE, false},
      {"cuMemAddressFree", CUDA_FN_MEM_ADDRESS_FREE, false},
      {"cuStreamBeginCapture_v2", CUDA_FN_STREAM_BEGIN_CAPTURE, false},
      {"cuStreamBeginCapture_v2_ptsz", CUDA_FN_STREAM_BEGIN_CAPTURE, true},
      {"cuStreamEndCapture", CUDA_FN_STREAM_END_CAPTURE, false},
      {"cuStreamEndCapture_ptsz", CUDA_FN_STREAM_END_CAPTURE, true},
      {"cuGraphInstantiateWithFlags", CUDA_FN_GRAPH_INSTANTIATE, false},
      {"cuGraphInstantiateWithParams", CUDA_FN_GRAPH_INSTANTIATE, false},
      {"cuGraphInstantiateWithParams_ptsz", CUDA_FN_GRAPH_INSTANTIATE, true},
      {"cuGraphInstantiate_v2", CUDA_FN_GRAPH_INSTANTIATE, true},
      {"cuGraphLaunch", CUDA_FN_GRAPH_LAUNCH, false},
      {"cuGraphLaunch_ptsz", CUDA_FN_GRAPH_LAUNCH, true},
      {"cuGraphExecUpdate_v2", CUDA_FN_GRAPH_EXEC_UPDATE, false},
  };
}

// A function's name in probes.disable: its per-thread-stream variant is the same probe to a user.
std::string api_name(const char* symbol) {
  std::string s = symbol;
  const std::string ptsz = "_ptsz";
  if (s.size() > ptsz.size() && s.compare(s.size() - ptsz.size(), ptsz.size(), ptsz) == 0)
    s.resize(s.size() - ptsz.size());
  return s;
}

// The accounting state a restart must not lose, and inflight: the previous agent's pinned links
// and this one's run side by side until it releases them, and one shared inflight makes the
// first return program of a call consume it (the other finds nothing), so nothing counts twice.
// The set's own counters continue too (vigil_agent_ringbuf_drops_total, table_full), and the
// failure ring: what the old links send, and what no agent had read at the restart, the next
// one reads.
constexpr const char* kPinnedMaps[] = {"procs", "live", "handles", "errors", "since", "inflight", "probe_stats", "failures"};

}  // namespace

std::vector<std::string> CudaProbe::names() {
  std::vector<std::string> out;
  for (const auto& t : cuda_targets())
    if (std::find(out.begin(), out.end(), api_name(t.symbol)) == out.end()) out.push_back(api_name(t.symbol));
  return out;
}

void CudaProbe::read_since() {
  const __u32 key = 0;
  __u64 since = 0;
  int fd = bpf_map__fd(skel_->maps.since);
  if (bpf_map_lookup_elem(fd, &key, &since) == 0 && since != 0) {
    since_ns_ = since;
    std::fprintf(stderr, "vigil-agent: cuda: pinned accounting adopted, counting since %.3f s ago\n",
                 static_cast<double>(boot_time_ns() - since) / 1e9);
    return;
  }
  since = boot_time_ns();
  bpf_map_update_elem(fd, &key, &since, BPF_ANY);
  since_ns_ = since;
}

CudaProbe::CudaProbe(const std::string& btf_path, AgentStats& stats, const std::set<std::string>& off,
                     const std::string& pin_dir)
    : stats_(stats), skel_("cuda", {cuda_bpf__open_opts, cuda_bpf__load, cuda_bpf__destroy}) {
  // With pins, libbpf reuses each pinned map whose type, sizes and flags match this object's and
  // pins the maps it creates; one that differs fails the load with -EINVAL (map_is_reuse_compat).
  // Not pinned: counting from zero, older processes marked (read_since).
  pinned_ = skel_.load(btf_path, pin_dir, {std::begin(kPinnedMaps), std::end(kPinnedMaps)});
  read_since();
  std::vector<UprobeTarget> targets;
  for (const auto& t : cuda_targets())
    if (!off.count(api_name(t.symbol))) targets.push_back(t);
  uprobes_ = std::make_unique<UprobeSet>("cuda", skel_->progs.cuda_enter, skel_->progs.cuda_exit,
                                         std::move(targets), stats_);
  if (pinned_) uprobes_->adopt_pinned_links(pin_dir);
  stats_sources_ = std::make_unique<SetStatsSources>(
      stats_, "cuda", skel_->maps.probe_stats, skel_->obj,
      std::vector<const bpf_map*>{skel_->maps.procs, skel_->maps.live, skel_->maps.handles, skel_->maps.errors,
                                  skel_->maps.inflight});
}

CudaProbe::~CudaProbe() = default;

int CudaProbe::on_failure(void* ctx, void* data, size_t size) {
  auto* self = static_cast<CudaProbe*>(ctx);
  if (size < sizeof(cuda_failure)) return 0;
  cuda_failure f;
  std::memcpy(&f, data, sizeof f);
  self->stats_.ringbuf_event("cuda");
  if (!self->log_limit_.allow()) return 0;
  std::fprintf(stderr,
               "vigil-agent: cuda failure: pid=%u tid=%u comm=%.16s %s -> %s stream=0x%llx "
               "graph=0x%llx size=%llu t=%llu ns code=%d\n",
               f.tgid, f.tid, f.comm, cuda_fn_name(f.fn), cuda_result_name(f.result).c_str(),
               static_cast<unsigned long long>(f.stream), static_cast<unsigned long long>(f.graph),
               static_cast<unsigned long long>(f.size), static_cast<unsigned long long>(f.ts_ns), f.result);
  return 0;
}

void CudaProbe::add_rings(RingReader& reader) {
  reader.add("cuda", bpf_map__fd(skel_->maps.failures), on_failure, this);
}

int CudaProbe::procs_fd() const { return bpf_map__fd(skel_->maps.procs); }
int CudaProbe::errors_fd() const { return bpf_map__fd(skel_->maps.errors); }
int CudaProbe::live_fd() const { return bpf_map__fd(skel_->maps.live); }
int CudaProbe::handles_fd() const { return bpf_map__fd(skel_->maps.handles); }

}  // namespace vigil::agent
