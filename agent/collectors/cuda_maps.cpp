// Reads cuda.bpf.c's maps for the CUDA collectors.
#include "collectors/cuda_maps.h"

#include <bpf/bpf.h>

#include <cstring>

#include "probes/bpf_util.h"

namespace vigil::agent {

std::map<uint32_t, cuda_proc> read_cuda_procs(int procs_fd) {
  std::map<uint32_t, cuda_proc> out;
  for (__u32 pid : map_keys<__u32>(procs_fd)) {
    cuda_proc p{};
    if (bpf_map_lookup_elem(procs_fd, &pid, &p) == 0) out[pid] = p;
  }
  return out;
}

std::vector<std::pair<cuda_err_key, uint64_t>> read_cuda_errors(int errors_fd) {
  std::vector<std::pair<cuda_err_key, uint64_t>> out;
  for (const auto& k : map_keys<cuda_err_key>(errors_fd)) {
    __u64 n = 0;
    if (bpf_map_lookup_elem(errors_fd, &k, &n) == 0) out.emplace_back(k, n);
  }
  return out;
}

LabelList cuda_process_labels(ProcessTable& processes, uint32_t pid, const cuda_proc& p) {
  ProcessLabels l = processes.labels(pid);
  std::string comm = l.comm.empty() ? std::string(p.comm, strnlen(p.comm, sizeof p.comm)) : l.comm;
  return {{"pid", std::to_string(pid)},
          {"comm", comm},
          {"container_id", l.identity.container_id},
          {"pod_uid", l.identity.pod_uid}};
}

}  // namespace vigil::agent
