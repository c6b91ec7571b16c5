// The labels every per-process series carries, built the same way by every collector.
#include "collectors/process_labels.h"

#include "collectors/label_value.h"

namespace vigil::agent {

LabelList process_labels(ProcessTable& processes, uint32_t pid, const std::string& kernel_comm) {
  ProcessLabels p = processes.labels(pid);
  std::string comm = valid_utf8(p.comm.empty() ? kernel_comm : p.comm);
  if (pid == 0) comm = "[unattributed]";
  return {{"pid", std::to_string(pid)},
          {"comm", comm},
          {"container_id", p.identity.container_id},
          {"pod_uid", p.identity.pod_uid},
          {"namespace", valid_utf8(p.names.namespace_name)},
          {"pod", valid_utf8(p.names.pod)},
          {"container", valid_utf8(p.names.container)}};
}

}  // namespace vigil::agent
