// Tensor-parallel group collector: renders a snapshot of collective.bpf.c's per-process map taken
// at scrape time. The worker numbers its collectives in the group, every rank alike, so the
// count is the group's sequence and not what this agent happened to see: ranks watched by agents
// started at different times (or restarted) still compare.
#include "collectors/tp_group_collector.h"

#include <cinttypes>
#include <cstdio>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "probes/bpf_util.h"
#include "probes/tcp_maps.h"  // monotonic_ns

namespace vigil::agent {

using prometheus::MetricType;

std::vector<prometheus::MetricFamily> TpGroupCollector::Collect() const {
  auto entered = make_family("tp_comm_collectives_total",
                             "Collectives entered by this rank of a worker's tensor-parallel group (the group's "
                             "own numbering, the same on every rank), by the group's id, rank and nranks.",
                             MetricType::Counter);
  auto age = make_family("tp_comm_last_collective_age_seconds",
                         "Seconds since this rank last entered a collective of its tensor-parallel group.",
                         MetricType::Gauge);
  const uint64_t now = monotonic_ns();
  for (const auto& [pid, p] : maps_.read().procs) {
    if (!p.group_id) continue;  // a worker whose group has not agreed on its id (or an older worker)
    LabelList l = process_labels(processes_, pid, bpf_string(p.comm));
    char id[17];
    std::snprintf(id, sizeof id, "%016" PRIx64, static_cast<uint64_t>(p.group_id));
    l.emplace_back("communicator", id);
    l.emplace_back("rank", std::to_string(p.rank));
    l.emplace_back("nranks", std::to_string(p.nranks));
    add_sample(entered, l, static_cast<double>(p.group_seq + 1));
    if (p.last_begin_ns && p.last_begin_ns <= now)
      add_sample(age, l, static_cast<double>(now - p.last_begin_ns) / 1e9);
  }
  return {entered, age};
}

}  // namespace vigil::agent
