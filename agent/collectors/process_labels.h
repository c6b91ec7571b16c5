// The labels every per-process series carries, built the same way by every collector.
#pragma once

#include <cstdint>
#include <string>

#include "collectors/metric_builder.h"
#include "discovery/process_table.h"

namespace vigil::agent {

// pid, comm, container_id, pod_uid, and the container's namespace, pod and container names (from
// the kubelet's /var/log/containers; empty off Kubernetes). comm is /proc's (read while the process lives, kept past its
// exit), else `kernel_comm`, the copy a BPF map holds for a process gone before /proc was read.
// pid 0 is the kernel's own context (softirqs, timers: only TCP sees it), "[unattributed]".
LabelList process_labels(ProcessTable& processes, uint32_t pid, const std::string& kernel_comm);

}  // namespace vigil::agent
