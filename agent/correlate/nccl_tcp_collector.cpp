// NCCL/TCP correlation. A collective over TCP (NCCL's socket transport, Gloo, the bootstrap)
// blocks while a socket retransmits with exponential backoff; with tcp_retries2=15 the kernel
// gives up only after 924.6 s, long after PyTorch's NCCL watchdog (10 min by default) aborts the
// job, so the abort is all anyone sees. For each process that uses NCCL:
//   nccl_tcp_timeout_risk_ratio = (stall so far + wait until the next retransmit) / timeout
// from its latest retransmitting socket: at 1 the next retry lands after the watchdog fires.
#include "correlate/nccl_tcp_collector.h"

#include <bpf/bpf.h>
#include <linux/types.h>

#include <algorithm>
#include <cstring>

#include "collectors/tcp_collector.h"
#include "export/metric_builder.h"
#include "nccl.h"
#include "probes/bpf_util.h"
#include "tcp.h"

namespace vigil::agent {

std::vector<prometheus::MetricFamily> NcclTcpCollector::Collect() const {
  auto risk = make_family("nccl_tcp_timeout_risk_ratio",
                          "For NCCL processes: (TCP stall so far + wait until the next retransmit) / collective timeout.",
                          prometheus::MetricType::Gauge);
  uint64_t now = monotonic_ns();
  double timeout = std::chrono::duration<double>(timeout_).count();
  for (__u32 pid : map_keys<__u32>(nccl_procs_fd_)) {
    nccl_proc n{};
    if (bpf_map_lookup_elem(nccl_procs_fd_, &pid, &n) != 0) continue;
    tcp_proc_state t{};
    double value = 0;
    if (bpf_map_lookup_elem(tcp_procs_fd_, &pid, &t) == 0) {
      double stall = stall_seconds(t, now);
      if (stall > 0) value = (stall + std::min(2.0 * static_cast<double>(t.rto_us) / 1e6, 120.0)) / timeout;
    }
    ProcessLabels l = processes_.labels(pid);
    add_sample(risk,
               {{"pid", std::to_string(pid)},
                {"comm", l.comm.empty() ? std::string(n.comm, strnlen(n.comm, sizeof n.comm)) : l.comm},
                {"container_id", l.identity.container_id},
                {"pod_uid", l.identity.pod_uid}},
               value);
  }
  return {risk};
}

}  // namespace vigil::agent
