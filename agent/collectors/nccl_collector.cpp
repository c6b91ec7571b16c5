// NCCL collector: reads nccl.bpf.c's maps at scrape time. Collective calls return when the work
// is enqueued, so these count what was asked of NCCL; a stall shows as calls that stop while
// TCP retransmits (tcp_* series of the same pid) rise.
#include "collectors/nccl_collector.h"

#include <bpf/bpf.h>
#include <linux/types.h>

#include <map>
#include <set>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "nccl.h"
#include "probes/bpf_util.h"
#include "probes/nccl_probe.h"

namespace vigil::agent {

using prometheus::MetricType;

void NcclCollector::expire() const {
  std::set<uint32_t> dead;
  for (__u32 pid : map_keys<__u32>(procs_fd_))
    if (processes_.expired(pid)) {
      dead.insert(pid);
      bpf_map_delete_elem(procs_fd_, &pid);
    }
  if (dead.empty()) return;
  for (const auto& k : map_keys<nccl_call_key>(calls_fd_))
    if (dead.count(k.tgid)) bpf_map_delete_elem(calls_fd_, &k);
  for (const auto& k : map_keys<nccl_async_key>(async_fd_))
    if (dead.count(k.tgid)) bpf_map_delete_elem(async_fd_, &k);
}

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

  std::map<uint32_t, LabelList> labels;
  for (__u32 pid : map_keys<__u32>(procs_fd_)) {
    nccl_proc p{};
    if (bpf_map_lookup_elem(procs_fd_, &pid, &p) != 0) continue;
    labels[pid] = process_labels(processes_, pid, bpf_string(p.comm));
    add_sample(comms, labels[pid], static_cast<double>(p.communicators));
    add_sample(aborts, labels[pid], static_cast<double>(p.aborts));
  }
  std::map<std::pair<uint32_t, unsigned>, uint64_t> op_bytes;
  for (const auto& k : map_keys<nccl_call_key>(calls_fd_)) {
    nccl_call_val v{};
    auto it = labels.find(k.tgid);
    if (it == labels.end() || bpf_map_lookup_elem(calls_fd_, &k, &v) != 0) continue;
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
  for (const auto& k : map_keys<nccl_async_key>(async_fd_)) {
    __u64 n = 0;
    auto it = labels.find(k.tgid);
    if (it == labels.end() || bpf_map_lookup_elem(async_fd_, &k, &n) != 0) continue;
    LabelList l = it->second;
    l.emplace_back("error", nccl_result_name(k.error));
    add_sample(async, l, static_cast<double>(n));
  }
  return {calls, bytes, async, comms, aborts};
}

}  // namespace vigil::agent
