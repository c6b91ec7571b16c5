// Tensor-parallel group collector: renders a snapshot of collective.bpf.c's per-process maps taken
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

namespace {
constexpr uint32_t kMaxRanks = 65536;
}  // namespace

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
  const CollectiveSnapshot snapshot = maps_.read();
  for (const auto& [pid, g] : snapshot.groups) {
    if (g.rank >= g.nranks || g.nranks > kMaxRanks) continue;  // not a worker's group: the workload's numbers
    const auto proc = snapshot.procs.find(pid);
    LabelList l = process_labels(processes_, pid, proc == snapshot.procs.end() ? "" : bpf_string(proc->second.comm));
    // "tp-" keeps the worker's ids apart from NCCL's (16 hex digits), which the same rules read:
    // no series of one kind can share a communicator label with one of the other.
    char id[20];
    std::snprintf(id, sizeof id, "tp-%016" PRIx64, static_cast<uint64_t>(g.group_id));
    l.emplace_back("communicator", id);
    l.emplace_back("rank", std::to_string(g.rank));
    l.emplace_back("nranks", std::to_string(g.nranks));
    add_sample(entered, l, static_cast<double>(g.seq + 1));
    if (g.last_begin_ns && g.last_begin_ns <= now)
      add_sample(age, l, static_cast<double>(now - g.last_begin_ns) / 1e9);
    if (const auto bytes = unread_tcp_bytes(processes_.proc_root(), pid))
      add_sample(unread, l, static_cast<double>(*bytes));
  }
  return {entered, age, unread};
}

}  // namespace vigil::agent
