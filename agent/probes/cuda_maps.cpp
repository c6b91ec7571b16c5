// Reads and trims cuda.bpf.c's accounting maps.
#include "probes/cuda_maps.h"

#include <bpf/bpf.h>

#include "probes/bpf_util.h"

namespace vigil::agent {

CudaSnapshot CudaMaps::read() const {
  CudaSnapshot s;
  s.procs = map_entries<uint32_t, cuda_proc>(procs_fd_);
  for (const auto& k : map_keys<cuda_err_key>(errors_fd_)) {
    __u64 n = 0;
    if (bpf_map_lookup_elem(errors_fd_, &k, &n) == 0) s.errors.emplace_back(k, n);
  }
  return s;
}

void CudaMaps::forget(uint32_t pid) const {
  bpf_map_delete_elem(procs_fd_, &pid);
  for (const auto& k : map_keys<cuda_err_key>(errors_fd_))
    if (k.tgid == pid) bpf_map_delete_elem(errors_fd_, &k);
  struct PtrKey {  // cuda.bpf.c's ptr_key, of the live and handles maps
    __u32 tgid, pad;
    __u64 ptr;
  };
  for (int fd : {live_fd_, handles_fd_})
    for (const auto& k : map_keys<PtrKey>(fd))
      if (k.tgid == pid) bpf_map_delete_elem(fd, &k);
}

}  // namespace vigil::agent
