// Loads nccl.bpf.c: one generic entry/return program pair attached per NCCL entry point with the
// function id as cookie (NCCL exports each as a weak alias of its pnccl* profiling name).
#include "probes/nccl_probe.h"

#include <linux/types.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "nccl_events.h"
#include "nccl.skel.h"
#include "probes/pinned_state.h"

namespace vigil::agent {
namespace {

const char* const kFnNames[NCCL_FN_MAX] = {
    "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitAll",
    "ncclAllReduce",   "ncclAllGather",    "ncclReduceScatter",      "ncclBroadcast",
    "ncclReduce",      "ncclSend",         "ncclRecv",               "ncclCommGetAsyncError",
    "ncclCommAbort",   "ncclCommDestroy",
};

// The accounting state a restart must not lose: per-process counters, calls and async errors, the
// communicators (id, rank, nranks, collectives entered), the set's own counters and the failure
// ring. inflight and init_args too: the previous agent's links run beside this one's until it
// releases them, and with one shared copy the first return program of a call consumes it (the
// other finds nothing) and an entry counts a collective only when no other entry program has
// saved the call (nccl.bpf.c), so nothing counts twice.
constexpr const char* kPinnedMaps[] = {"procs",    "calls",       "async_errors", "comms",
                                       "inflight", "init_args",   "probe_stats",  "failures"};

}  // namespace

const char* nccl_fn_name(unsigned fn) { return fn < NCCL_FN_MAX ? kFnNames[fn] : "unknown"; }

std::string nccl_result_name(int result) {
  // ncclResult_t from nccl.h (NCCL 2.28).
  static const char* const kNames[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                       "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                       "ncclRemoteError",   "ncclInProgress"};
  if (result >= 0 && result < static_cast<int>(std::size(kNames))) return kNames[result];
  return "other";  // one label value for every unknown code (the log line has the number)
}


std::vector<std::string> NcclProbe::names() { return {std::begin(kFnNames), std::end(kFnNames)}; }

// With pins, libbpf reuses each pinned map whose type, sizes and flags match (CudaProbe).
NcclProbe::NcclProbe(const std::string& btf_path, AgentStats& stats, const std::set<std::string>& off,
                     const std::string& pin_dir)
    : stats_(stats), skel_("nccl", {nccl_bpf__open_opts, nccl_bpf__load, nccl_bpf__destroy}) {
  const bool pinned = skel_.load(btf_path, pin_dir, {std::begin(kPinnedMaps), std::end(kPinnedMaps)});
  std::vector<UprobeTarget> targets;
  for (unsigned fn = 0; fn < NCCL_FN_MAX; ++fn)
    if (!off.count(kFnNames[fn])) targets.push_back({kFnNames[fn], fn, false});
  uprobes_ = std::make_unique<UprobeSet>("nccl", skel_->progs.nccl_enter, skel_->progs.nccl_exit,
                                         std::move(targets), stats_);
  if (pinned) uprobes_->adopt_pinned_links(pin_dir);
  stats_sources_ = std::make_unique<SetStatsSources>(
      stats_, "nccl", skel_->maps.probe_stats, skel_->obj,
      std::vector<const bpf_map*>{skel_->maps.procs, skel_->maps.calls, skel_->maps.async_errors, skel_->maps.inflight,
                                  skel_->maps.comms, skel_->maps.init_args});
}

NcclProbe::~NcclProbe() = default;

int NcclProbe::on_failure(void* ctx, void* data, size_t size) {
  auto* self = static_cast<NcclProbe*>(ctx);
  if (size < sizeof(nccl_failure)) return 0;
  nccl_failure f;
  std::memcpy(&f, data, sizeof f);
  self->stats_.ringbuf_event("nccl");
  if (!self->log_limit_.allow()) return 0;
  std::fprintf(stderr, "vigil-agent: nccl failure: pid=%u comm=%.16s %s -> %s ncclComm=0x%llx nranks=%d rank=%d code=%d\n",
               f.tgid, f.comm, nccl_fn_name(f.fn), nccl_result_name(f.result).c_str(),
               static_cast<unsigned long long>(f.comm_handle), f.nranks, f.rank, f.result);
  return 0;
}

void NcclProbe::add_rings(RingReader& reader) {
  reader.add("nccl", bpf_map__fd(skel_->maps.failures), on_failure, this);
}

int NcclProbe::calls_fd() const { return bpf_map__fd(skel_->maps.calls); }
int NcclProbe::async_errors_fd() const { return bpf_map__fd(skel_->maps.async_errors); }
int NcclProbe::procs_fd() const { return bpf_map__fd(skel_->maps.procs); }
int NcclProbe::comms_fd() const { return bpf_map__fd(skel_->maps.comms); }

}  // namespace vigil::agent
