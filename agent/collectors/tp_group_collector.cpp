// Tensor-parallel group collector: renders a snapshot of collective.bpf.c's per-process map taken
// at scrape time. The worker numbers its collectives in the group, every rank alike, so the
// count is the group's sequence and not what this agent happened to see: ranks watched by agents
// started at different times (or restarted) still compare. Gloo's transfers need both ends to
// run (a rank that entered a collective first may be stopped before it sends its share), so a
// stuck rank can be level with the ranks that wait for it; what tells it apart then is the data
// they sent it, unread in its sockets.
#include "collectors/tp_group_collector.h"

#include <cinttypes>
#include <cstdio>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "discovery/unread_bytes.h"
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
  auto unread = make_family("tp_comm_unread_bytes",
                            "Bytes on this rank's TCP connections that arrived and it has not read (their receive "
                            "queues): a rank stopped inside a collective holds its peers' data while they wait.",
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
    if (const auto bytes = unread_tcp_bytes(processes_.proc_root(), pid)) add_sample(unread, l, static_cast<double>(*bytes));
  }
  return {entered, age, unread};
}

}  // namespace vigil::agent
