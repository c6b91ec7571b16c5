// The proc set: process exec and exit events into discovery and the process table.
#include "sets/proc_set.h"

#include <cstdio>
#include <exception>

#include "probes/pinned_state.h"

namespace vigil::agent {

std::unique_ptr<ProbeSet> ProcSet::load(SetContext& ctx) {
  try {
    return std::make_unique<ProcSet>(ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vigil-agent: process events unavailable (%s); scanning /proc every tick\n", e.what());
    return nullptr;
  }
}

ProcSet::ProcSet(SetContext& ctx)
    : processes_(ctx.processes),
      libraries_(ctx.libraries),
      probe_(ctx.cfg.kernel_btf, ctx.stats, [this](uint32_t pid, bool exec) { on_event(pid, exec); },
             set_pin_dir(ctx.cfg.bpf_pin_root, "proc")) {
  // First what may throw, so a constructor that fails leaves no callback and no recording behind
  // (the destructor, which turns recording off, would not run).
  probe_.add_rings(ctx.rings);
  // The kernel sends the exits of the processes in the table only: the table's changes are
  // mirrored into the probe's map from housekeeping (poll, expire), never from a scrape.
  processes_.record_changes(true);
  libraries_.set_exec_events(true);
}

ProcSet::~ProcSet() {
  processes_.record_changes(false);
  libraries_.set_exec_events(false);
}

void ProcSet::mirror_changes() {
  for (const auto& c : processes_.take_changes()) probe_.track(c.pid, c.present);
}

void ProcSet::on_event(uint32_t pid, bool exec) {
  if (exec) {
    processes_.mark_exec(pid);
    libraries_.on_exec(pid);
  } else {
    processes_.mark_exited(pid);
    libraries_.on_exit(pid);
  }
}

}  // namespace vigil::agent
