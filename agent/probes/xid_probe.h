// Attaches xid.bpf.c to nvidia:nvidia_dev_xid when the NVIDIA module defines it (attach if
// present), with field offsets from its format file; logs each XID with its message and hands it
// to a callback (the ledger, which counts it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "probes/bpf_util.h"
#include "probes/ring_reader.h"
#include "probes/skeleton.h"
#include "stats/agent_stats.h"

struct xid_bpf;

namespace vigil::agent {

// Which tracepoint, and which of its fields are the PCI device, the XID code and the message.
// The defaults are the NVIDIA module's; tests point it at a tracepoint of the same shape.
struct XidTracepoint {
  std::string tracefs = "/sys/kernel/tracing";
  std::string category = "nvidia";
  std::string name = "nvidia_dev_xid";
  std::string dev_field = "dev";
  std::string code_field = "error_code";
  std::string msg_field = "msg";
};

class XidProbe {
 public:
  // (PCI name, XID code, message) of one event, on the ring reader's thread.
  using OnXid = std::function<void(const std::string& gpu, uint32_t code, const std::string& msg)>;
  // Throws TracepointMissing when the tracepoint is absent, std::runtime_error on other failures.
  XidProbe(const std::string& btf_path, AgentStats& stats, OnXid on_xid, const XidTracepoint& tp = {});
  ~XidProbe();
  XidProbe(const XidProbe&) = delete;
  XidProbe& operator=(const XidProbe&) = delete;

  // Registers the event ring with `reader`: events are logged and kept from the reader's thread.
  void add_rings(RingReader& reader);
  // The latest event lines (at most kRecent), oldest first.
  const std::deque<std::string>& recent_events() const { return recent_; }
  static constexpr size_t kRecent = 64;

 private:
  static int on_event(void* ctx, void* data, size_t size);
  AgentStats& stats_;
  OnXid on_xid_;
  Skeleton<xid_bpf> skel_;
  Link link_;
  std::unique_ptr<SetStatsSources> stats_sources_;
  LogLimiter log_limit_{50};
  std::deque<std::string> recent_;
};

}  // namespace vigil::agent
