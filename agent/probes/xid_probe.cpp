// Loads xid.bpf.c for nvidia:nvidia_dev_xid. The module's event record layout is read from its
// format file at start (its types are not in vmlinux BTF), so a module that reorders the fields
// still decodes; a module without the tracepoint leaves the set disabled, not the agent.
#include "probes/xid_probe.h"

#include <linux/types.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "probes/tracepoint_format.h"
#include "xid_events.h"
#include "xid.skel.h"

namespace vigil::agent {

XidProbe::XidProbe(const std::string& btf_path, AgentStats& stats, OnXid on_xid, const XidTracepoint& tp)
    : stats_(stats), on_xid_(std::move(on_xid)), skel_("xid", {xid_bpf__open_opts, xid_bpf__load, xid_bpf__destroy}) {
  auto fields = read_tracepoint_format(tp.tracefs, tp.category, tp.name);
  if (!fields) throw TracepointMissing(tp.category + ":" + tp.name + " not in " + tp.tracefs);
  auto field = [&](const std::string& name, bool data_loc) {
    auto it = fields->find(name);
    if (it == fields->end() || it->second.data_loc() != data_loc || it->second.size != 4)
      throw std::runtime_error(tp.category + ":" + tp.name + ": field '" + name + "' missing or not " +
                               (data_loc ? "a __data_loc string" : "a 32-bit integer"));
    return it->second.offset;
  };
  const auto dev_loc_off = field(tp.dev_field, true);
  const auto code_off = field(tp.code_field, false);
  const auto msg_loc_off = field(tp.msg_field, true);
  skel_.load(btf_path, "", {}, [&](xid_bpf& s) {
    s.rodata->dev_loc_off = dev_loc_off;
    s.rodata->code_off = code_off;
    s.rodata->msg_loc_off = msg_loc_off;
  });
  link_.reset(bpf_program__attach_tracepoint(skel_->progs.nvidia_dev_xid, tp.category.c_str(), tp.name.c_str()));
  if (!link_) {
    int err = errno;
    stats_.attach_failure("xid", errno_reason(err));
    throw std::runtime_error("attach " + tp.category + ":" + tp.name + ": " + errno_reason(err));
  }
  stats_.add_attached("xid", 1);
  stats_sources_ = std::make_unique<SetStatsSources>(stats_, "xid", skel_->maps.probe_stats, skel_->obj,
                                                     std::vector<const bpf_map*>{});
}

XidProbe::~XidProbe() {
  stats_sources_.reset();
  stats_.add_attached("xid", -1);
}

int XidProbe::on_event(void* ctx, void* data, size_t size) {
  auto* self = static_cast<XidProbe*>(ctx);
  if (size < sizeof(xid_event)) return 0;
  xid_event e;
  std::memcpy(&e, data, sizeof e);
  self->stats_.ringbuf_event("xid");
  char line[320];
  std::snprintf(line, sizeof line, "vigil-agent: xid: gpu=%.*s xid=%u pid=%u msg=%.*s", XID_DEV_LEN, e.dev,
                e.code, e.pid, XID_MSG_LEN, e.msg);
  self->recent_.emplace_back(line);
  if (self->recent_.size() > kRecent) self->recent_.pop_front();
  if (self->log_limit_.allow()) std::fprintf(stderr, "%s\n", line);
  self->on_xid_(bpf_string(e.dev), e.code, bpf_string(e.msg));
  return 0;
}

void XidProbe::add_rings(RingReader& reader) {
  reader.add("xid", bpf_map__fd(skel_->maps.events), on_event, this);
}

}  // namespace vigil::agent
