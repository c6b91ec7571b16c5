// The labels every per-process series carries, built the same way by every collector.
#include "collectors/process_labels.h"

namespace vigil::agent {

LabelList process_labels(ProcessTable& processes, uint32_t pid, const std::string& kernel_comm) {
  ProcessLabels p = processes.labels(pid);
  std::string comm = p.comm.empty() ? kernel_comm : p.comm;
  if (pid == 0) comm = "[unattributed]";
  return {{"pid", std::to_string(pid)},
          {"comm", comm},
          {"container_id", p.identity.container_id},
          {"pod_uid", p.identity.pod_uid},
          {"namespace", p.names.namespace_name},
          {"pod", p.names.pod},
          {"container", p.names.container}};
}

}  // namespace vigil::agent
