// Reads cuda.bpf.c's maps for the CUDA collectors.
#include "collectors/cuda_maps.h"

#include <bpf/bpf.h>

#include "probes/bpf_util.h"

namespace vigil::agent {

std::map<uint32_t, cuda_proc> read_cuda_procs(int procs_fd) { return map_entries<uint32_t, cuda_proc>(procs_fd); }

std::vector<std::pair<cuda_err_key, uint64_t>> read_cuda_errors(int errors_fd) {
  std::vector<std::pair<cuda_err_key, uint64_t>> out;
  for (const auto& k : map_keys<cuda_err_key>(errors_fd)) {
    __u64 n = 0;
    if (bpf_map_lookup_elem(errors_fd, &k, &n) == 0) out.emplace_back(k, n);
  }
  return out;
}

}  // namespace vigil::agent
