// The owner of nccl.bpf.c's per-process maps on the user side: reads them into a snapshot for the
// NCCL collector and the correlator, and forgets exited processes. No other code walks or writes
// these maps.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "nccl_events.h"

namespace vigil::agent {

// nccl.bpf.c's maps as read at one moment.
struct NcclSnapshot {
  std::map<uint32_t, nccl_proc> procs;                         // by pid
  std::vector<std::pair<nccl_comm_key, nccl_comm_val>> comms;  // per communicator of a process
  std::vector<std::pair<nccl_call_key, nccl_call_val>> calls;  // (pid, function, result)
  std::vector<std::pair<nccl_async_key, uint64_t>> async;      // (pid, error) -> reports
};

// Which of the maps a read walks: the correlator polls every 50 ms and needs two of the four,
// while `calls` alone holds up to 16,384 entries.
enum NcclMapSet : unsigned { kNcclProcs = 1, kNcclComms = 2, kNcclCalls = 4, kNcclAsync = 8, kNcclAll = 15 };

// What the NCCL collector and the correlator read: the maps, or a snapshot a unit test made.
class NcclReader {
 public:
  virtual ~NcclReader() = default;
  // The snapshot with the maps in MAPS filled, the others empty.
  virtual NcclSnapshot read(unsigned maps) const = 0;
};

class NcclMaps : public NcclReader {
 public:
  NcclMaps(int procs_fd, int comms_fd, int calls_fd, int async_fd)
      : procs_fd_(procs_fd), comms_fd_(comms_fd), calls_fd_(calls_fd), async_fd_(async_fd) {}
  NcclSnapshot read(unsigned maps) const override;
  // Deletes the PIDS' entries from procs, comms, calls and async_errors.
  void forget(const std::set<uint32_t>& pids) const;

 private:
  int procs_fd_, comms_fd_, calls_fd_, async_fd_;
};

}  // namespace vigil::agent
