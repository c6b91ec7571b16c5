// NCCL backend of the Communicator (GPU builds only): buffers are device pointers, collectives run
// on the communicator's stream, and the per-call timeout is enforced by polling and aborting,
// because NCCL itself has no timeout (NCCL_TIMEOUT does not exist; PyTorch's watchdog does this).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>

#include "comm/communicator.h"

namespace vigil {

struct NcclOptions {
  int rank = 0;
  int world = 1;
  int device = 0;  // CUDA device of this rank
  // Rendezvous: rank 0 writes the ncclUniqueId to `store_dir`/`prefix`.id, the others wait for it.
  // The id (and NCCL's bootstrap) then travels over TCP: NCCL_SOCKET_IFNAME picks the interface.
  std::string store_dir;
  std::string prefix = "vigil-tp";
  std::chrono::milliseconds connect_timeout{60000};
};

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const NcclOptions& options);  // throws std::runtime_error
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string_view backend() const override { return "nccl"; }

 protected:
  void do_all_gather(const float* in, size_t count, float* out, std::chrono::milliseconds timeout) override;
  void do_all_reduce_sum(float* data, size_t count, std::chrono::milliseconds timeout) override;
  void do_broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout) override;
  void do_barrier(std::chrono::milliseconds timeout) override;

 private:
  // Waits for the stream until the deadline, watching NCCL's async error; aborts the communicator
  // on timeout or error (the only way to unblock its kernels) and throws CollectiveError.
  void wait(CollectiveOp op, ncclResult_t enqueued, std::chrono::milliseconds timeout);
  ncclComm_t live(CollectiveOp op) const;  // throws once a failure has aborted the communicator

  int rank_, world_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* barrier_buf_ = nullptr;  // one device float for the barrier's all-reduce
};

}  // namespace vigil
