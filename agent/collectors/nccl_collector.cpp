// NCCL collector: renders a snapshot of nccl.bpf.c's maps taken at scrape time. Collective calls return when the work
// is enqueued, so these count what was asked of NCCL; a stall shows as calls that stop while
// TCP retransmits (tcp_* series of the same pid) rise. Per communicator, the labels are the
// hash of its unique id (equal on every rank), rank and nranks: the mixin compares the ranks of
// one communicator across nodes (docs/correlation.md).
#include "collectors/nccl_collector.h"

#include <map>
#include <set>

#include "collectors/metric_builder.h"
#include "collectors/nccl_comm_id.h"
#include "collectors/process_labels.h"
#include "probes/tcp_maps.h"  // monotonic_ns
#include "probes/bpf_util.h"
#include "probes/nccl_probe.h"

namespace vigil::agent {

using prometheus::MetricType;

std::vector<prometheus::MetricFamily> NcclCollector::Collect() const {
  auto calls = make_family("nccl_calls_total", "NCCL API calls by function and result (collectives: at enqueue).",
                           MetricType::Counter);
  auto bytes = make_family("nccl_bytes_total", "Bytes handed to successful NCCL collectives and send/recv, by op.",
                           MetricType::Counter);
  auto async = make_family("nccl_async_errors_total", "Errors reported by ncclCommGetAsyncError, by error.",
                           MetricType::Counter);
  auto comms = make_family("nccl_communicators", "Communicators initialised and not yet destroyed or aborted.",
                           MetricType::Gauge);
  auto aborts = make_family("nccl_comm_aborts_total", "ncclCommAbort calls.", MetricType::Counter);
  auto comm_calls = make_family("nccl_comm_collectives_total",
                                "Collectives (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce) entered on a "
                                "communicator, by its id (hash of its ncclUniqueId), this process's rank and nranks.",
                                MetricType::Counter);
  auto comm_age = make_family("nccl_comm_last_collective_age_seconds",
                              "Seconds since this rank last entered a collective on the communicator (NCCL "
                              "returns at enqueue: as far as the host shows, the latest is open until the next).",
                              MetricType::Gauge);
  auto untracked = make_family("nccl_comms_untracked_total",
                               "Communicators of a process not tracked per communicator: it had " +
                                   std::to_string(NCCL_COMMS_PER_PROCESS) + " already.",
                               MetricType::Counter);

  const NcclSnapshot snapshot = maps_.read(kNcclAll);
  std::map<uint32_t, LabelList> labels;
  for (const auto& [pid, p] : snapshot.procs) {
    labels[pid] = process_labels(processes_, pid, bpf_string(p.comm));
    add_sample(comms, labels[pid], static_cast<double>(p.communicators));
    add_sample(aborts, labels[pid], static_cast<double>(p.aborts));
    add_sample(untracked, labels[pid], static_cast<double>(p.comms_refused));
  }
  const uint64_t now = monotonic_ns();
  for (const auto& [k, v] : snapshot.comms) {
    auto it = labels.find(k.tgid);
    if (it == labels.end()) continue;
    LabelList l = it->second;
    l.emplace_back("communicator", nccl_comm_id(v.id, sizeof v.id));
    l.emplace_back("rank", std::to_string(v.rank));
    l.emplace_back("nranks", std::to_string(v.nranks));
    add_sample(comm_calls, l, static_cast<double>(v.collectives));
    if (v.last_enter_ns && v.last_enter_ns <= now)
      add_sample(comm_age, l, static_cast<double>(now - v.last_enter_ns) / 1e9);
  }
  std::map<std::pair<uint32_t, unsigned>, uint64_t> op_bytes;
  for (const auto& [k, v] : snapshot.calls) {
    auto it = labels.find(k.tgid);
    if (it == labels.end()) continue;
    LabelList l = it->second;
    l.emplace_back("function", nccl_fn_name(k.fn));
    l.emplace_back("result", nccl_result_name(k.result));
    add_sample(calls, l, static_cast<double>(v.calls));
    if (k.fn >= NCCL_FN_ALL_REDUCE && k.fn <= NCCL_FN_RECV) op_bytes[{k.tgid, k.fn}] += v.bytes;
  }
  for (const auto& [key, n] : op_bytes) {
    LabelList l = labels[key.first];
    l.emplace_back("op", nccl_fn_name(key.second) + 4);  // "AllReduce", "Send", ...
    add_sample(bytes, l, static_cast<double>(n));
  }
  for (const auto& [k, n] : snapshot.async) {
    auto it = labels.find(k.tgid);
    if (it == labels.end()) continue;
    LabelList l = it->second;
    l.emplace_back("error", nccl_result_name(k.error));
    add_sample(async, l, static_cast<double>(n));
  }
  return {calls, bytes, async, comms, aborts, comm_calls, comm_age, untracked};
}

}  // namespace vigil::agent
