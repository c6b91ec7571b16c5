// Reads cuda.bpf.c's per-process state and error counters, shared by the CUDA collectors.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cuda.h"
#include "discovery/process_table.h"
#include "export/metric_builder.h"

namespace vigil::agent {

std::map<uint32_t, cuda_proc> read_cuda_procs(int procs_fd);
std::vector<std::pair<cuda_err_key, uint64_t>> read_cuda_errors(int errors_fd);
// pid, comm (from /proc while alive, else the kernel's), container_id, pod_uid.
LabelList cuda_process_labels(ProcessTable& processes, uint32_t pid, const cuda_proc& p);

}  // namespace vigil::agent
