// The owner of cuda.bpf.c's accounting maps on the user side: reads them into a snapshot for the
// CUDA collectors and forgets exited processes. No other code walks or writes these maps.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cuda_events.h"

namespace vigil::agent {

// cuda.bpf.c's per-process state and failed-call counters, as read at one moment.
struct CudaSnapshot {
  std::map<uint32_t, cuda_proc> procs;
  std::vector<std::pair<cuda_err_key, uint64_t>> errors;
};

// What the CUDA collectors read: the maps, or a snapshot a unit test made.
class CudaReader {
 public:
  virtual ~CudaReader() = default;
  virtual CudaSnapshot read() const = 0;
};

class CudaMaps : public CudaReader {
 public:
  CudaMaps(int procs_fd, int errors_fd, int live_fd, int handles_fd)
      : procs_fd_(procs_fd), errors_fd_(errors_fd), live_fd_(live_fd), handles_fd_(handles_fd) {}
  CudaSnapshot read() const override;
  // Deletes PID's entries from every accounting map (procs, errors, live, handles).
  void forget(uint32_t pid) const;

 private:
  int procs_fd_, errors_fd_, live_fd_, handles_fd_;
};

}  // namespace vigil::agent
