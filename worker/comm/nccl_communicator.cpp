// NCCL with a deadline: the communicator is created non-blocking, each collective is enqueued and
// then polled (stream done? async error?) until the caller's timeout, then aborted.
#include "comm/nccl_communicator.h"

#include <fstream>
#include <thread>

namespace vigil {
namespace {

using Clock = std::chrono::steady_clock;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("nccl backend: ") + what + ": " + cudaGetErrorString(e));
}

ncclUniqueId rendezvous(const NcclOptions& o) {
  ncclUniqueId id{};
  const std::string path = o.store_dir + "/" + o.prefix + ".id";
  if (o.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      throw std::runtime_error(std::string("nccl: ncclGetUniqueId: ") + ncclGetErrorString(r));
    // Written under a temporary name and renamed, so a reader never sees half an id.
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof id.internal);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("nccl: cannot write " + path);
    return id;
  }
  const auto deadline = Clock::now() + o.connect_timeout;
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(id.internal, sizeof id.internal)) return id;
    if (Clock::now() > deadline) throw std::runtime_error("nccl: no rendezvous id at " + path + " in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(const NcclOptions& o) : rank_(o.rank), world_(o.world) {
  check_cuda(cudaSetDevice(o.device), "cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaMalloc(&barrier_buf_, sizeof(float)), "cudaMalloc");
  const ncclUniqueId id = rendezvous(o);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so init and collectives return, and a stuck one can be aborted
  ncclResult_t r = ncclCommInitRankConfig(&comm_, o.world, id, o.rank, &config);
  const auto deadline = Clock::now() + o.connect_timeout;
  while (r == ncclInProgress || r == ncclSuccess) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) { r = state; break; }
    if (Clock::now() > deadline) { r = ncclInProgress; break; }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
  throw std::runtime_error(std::string("nccl: ncclCommInitRankConfig (rank ") + std::to_string(o.rank) + "): " +
                           (r == ncclInProgress ? "timed out" : ncclGetErrorString(r)));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
  if (barrier_buf_) cudaFree(barrier_buf_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::wait(CollectiveOp op, ncclResult_t enqueued, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  ncclResult_t state = enqueued;
  while (state == ncclSuccess || state == ncclInProgress) {
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    if (state == ncclSuccess || state == ncclInProgress) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess && state == ncclSuccess) return;
      if (q != cudaSuccess && q != cudaErrorNotReady) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw CollectiveError(op, CollectiveStatus::kError, cudaGetErrorString(q));
      }
      if (Clock::now() > deadline) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw CollectiveError(op, CollectiveStatus::kTimeout, "timed out; communicator aborted");
      }
      std::this_thread::yield();
    }
  }
  ncclCommAbort(comm_);
  comm_ = nullptr;
  throw CollectiveError(op, CollectiveStatus::kError, ncclGetErrorString(state));
}

ncclComm_t NcclCommunicator::live(CollectiveOp op) const {
  if (!comm_)
    throw CollectiveError(op, CollectiveStatus::kError, "the communicator was aborted by an earlier failure");
  return comm_;
}

void NcclCommunicator::do_all_gather(const float* in, size_t count, float* out, std::chrono::milliseconds timeout) {
  const CollectiveOp op = CollectiveOp::kAllGather;
  wait(op, ncclAllGather(in, out, count, ncclFloat32, live(op), stream_), timeout);
}

void NcclCommunicator::do_all_reduce_sum(float* data, size_t count, std::chrono::milliseconds timeout) {
  const CollectiveOp op = CollectiveOp::kAllReduce;
  wait(op, ncclAllReduce(data, data, count, ncclFloat32, ncclSum, live(op), stream_), timeout);
}

void NcclCommunicator::do_broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout) {
  const CollectiveOp op = CollectiveOp::kBroadcast;
  wait(op, ncclBroadcast(data, data, bytes, ncclUint8, root, live(op), stream_), timeout);
}

void NcclCommunicator::do_barrier(std::chrono::milliseconds timeout) {
  const CollectiveOp op = CollectiveOp::kBarrier;
  wait(op, ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, live(op), stream_), timeout);
}

}  // namespace vigil
