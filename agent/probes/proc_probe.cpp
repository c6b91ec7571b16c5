// Loads proc.bpf.c (tp_btf on sched_process_exec/exit, present since BTF tracepoints exist).
#include "probes/proc_probe.h"

#include <linux/types.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "probes/pinned_state.h"
#include "proc_events.h"
#include "proc.skel.h"

namespace vigil::agent {

namespace {

constexpr const char* kPinnedMaps[] = {"events", "tracked", "probe_stats"};

}  // namespace

ProcProbe::ProcProbe(const std::string& btf_path, AgentStats& stats, Handler handler, const std::string& pin_dir)
    : stats_(stats), handler_(std::move(handler)), skel_("proc", {proc_bpf__open_opts, proc_bpf__load, proc_bpf__destroy}) {
  for (const char* tp : {"sched_process_exec", "sched_process_exit"})
    if (!kernel_has_btf_tracepoint(btf_path, tp))
      throw std::runtime_error(std::string("tracepoint ") + tp + " missing from kernel BTF");
  skel_.load(btf_path, pin_dir, {std::begin(kPinnedMaps), std::end(kPinnedMaps)});
  std::vector<const bpf_map*> shared;
  for (const char* name : kPinnedMaps) shared.push_back(bpf_object__find_map_by_name(skel_->obj, name));
  // Links go under the set's directory even when its maps could not be reused: the previous
  // agent's then fail the same-maps check and are replaced, not left counting into maps no one reads.
  if (!pin_dir.empty()) mkdir((pin_dir + "/links").c_str(), 0700);
  links_ = std::make_unique<PinnedLinks>("proc", pin_dir.empty() ? "" : pin_dir + "/links", shared);
  for (bpf_program* prog : {skel_->progs.process_exec, skel_->progs.process_exit})
    if (int err = links_->attach(prog)) stats_.attach_failure("proc", errno_reason(err));
  links_->report();
  stats_.add_attached("proc", links_->size());
  stats_sources_ = std::make_unique<SetStatsSources>(stats_, "proc", skel_->maps.probe_stats, skel_->obj,
                                                     std::vector<const bpf_map*>{skel_->maps.tracked},
                                                     [this] { return links_->running(); });
}

ProcProbe::~ProcProbe() {
  stats_sources_.reset();
  stats_.add_attached("proc", -links_->size());
}

int ProcProbe::on_event(void* ctx, void* data, size_t size) {
  auto* self = static_cast<ProcProbe*>(ctx);
  if (size < sizeof(vigil_proc_event)) return 0;
  vigil_proc_event e;
  std::memcpy(&e, data, sizeof e);
  self->stats_.ringbuf_event("proc");
  self->handler_(e.tgid, e.kind == PROC_EXEC);
  return 0;
}

void ProcProbe::track(uint32_t pid, bool on) {
  const __u32 key = pid;
  const __u8 one = 1;
  // A full map (E2BIG) leaves that exit to the /proc check; a pid already gone is ENOENT.
  if (on)
    bpf_map_update_elem(bpf_map__fd(skel_->maps.tracked), &key, &one, BPF_ANY);
  else
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.tracked), &key);
}

void ProcProbe::add_rings(RingReader& reader) {
  reader.add("proc", bpf_map__fd(skel_->maps.events), on_event, this);
}

}  // namespace vigil::agent
