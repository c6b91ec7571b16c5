// The XID set: the kernel log and the tracepoint into one ledger; see xid_set.h.
#include "sets/xid_set.h"

#include <cstdio>

#include "probes/pinned_state.h"

namespace vigil::agent {

XidSet::XidSet(SetContext& ctx) {
  std::string tracepoint_missing;
  try {
    probe_ = std::make_unique<XidProbe>(
        ctx.cfg.kernel_btf, ctx.stats,
        [this](const std::string& gpu, uint32_t code, const std::string& msg) { ledger_.on_tracepoint(gpu, code, msg); });
  } catch (const TracepointMissing& e) {
    tracepoint_missing = e.what();
  }
  ledger_.set_tracepoint(probe_ != nullptr);
  std::string log_error = "off";
  if (!ctx.cfg.kernel_log.empty()) {
    try {
      log_ = std::make_unique<KmsgReader>(ctx.cfg.kernel_log, set_pin_dir(ctx.cfg.bpf_pin_root, "xid"), ledger_);
    } catch (const std::exception& e) {
      log_error = e.what();
    }
  }
  // Neither source: no XID can be seen on this node (reported as before the kernel log was read).
  if (!probe_ && !log_) throw TracepointMissing(tracepoint_missing + "; kernel log: " + log_error);
  if (log_)
    std::fprintf(stderr, "vigil-agent: xid: kernel log %s from record %llu; tracepoint %s\n", log_->path().c_str(),
                static_cast<unsigned long long>(log_->start_seq()), probe_ ? "attached" : "absent");
  else
    std::fprintf(stderr, "vigil-agent: xid: kernel log not read (%s); tracepoint attached\n", log_error.c_str());
  collector_ = std::make_shared<XidCollector>(ledger_);
  if (probe_) probe_->add_rings(ctx.rings);  // last: a constructor that throws leaves no callback behind
}

std::vector<NamedCollector> XidSet::collectors() { return {{"xid", collector_}}; }

}  // namespace vigil::agent
