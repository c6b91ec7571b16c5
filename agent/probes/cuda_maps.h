// Reads cuda.bpf.c's per-process state and error counters, shared by the CUDA collectors.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cuda_events.h"

namespace vigil::agent {

std::map<uint32_t, cuda_proc> read_cuda_procs(int procs_fd);
std::vector<std::pair<cuda_err_key, uint64_t>> read_cuda_errors(int errors_fd);

}  // namespace vigil::agent
