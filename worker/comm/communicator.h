// Collective communication between tensor-parallel ranks: one interface over Gloo (TCP, CPUs) and
// NCCL (GPUs), every call bounded by a timeout, traced (USDT collective_begin/end) and counted.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace vigil {

// Values are the `op` argument of the USDT probes (docs/probes.md): keep them stable.
enum class CollectiveOp : uint32_t { kAllGather = 1, kAllReduce = 2, kBroadcast = 3, kBarrier = 4 };
// Values are the `status` argument of collective_end: 0 ok, anything else a failure.
enum class CollectiveStatus : uint32_t { kOk = 0, kTimeout = 1, kError = 2 };

const char* collective_op_name(CollectiveOp op);
const char* collective_status_name(CollectiveStatus status);

// A collective that did not complete: timed out, or the transport failed (peer gone, reset).
// After one, the communicator is unusable: peers may be in a different collective by now.
class CollectiveError : public std::runtime_error {
 public:
  CollectiveError(CollectiveOp op, CollectiveStatus status, const std::string& what)
      : std::runtime_error(what), op_(op), status_(status) {}
  CollectiveOp op() const { return op_; }
  CollectiveStatus status() const { return status_; }

 private:
  CollectiveOp op_;
  CollectiveStatus status_;
};

// Sees every collective once it ended (metrics); called on the calling thread.
class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  virtual void on_collective(CollectiveOp op, CollectiveStatus status, size_t bytes, double seconds) = 0;
};

// The public calls fire the probes and the observer around the backend's do_* call, and turn any
// backend failure into a CollectiveError, so no backend can forget either. Not thread-safe: one
// collective at a time, in the same order on every rank.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual std::string_view backend() const = 0;

  // out[r * count + i] = rank r's in[i]; `bytes` in the probes is what this rank contributes.
  void all_gather(const float* in, size_t count, float* out, std::chrono::milliseconds timeout);
  // data[i] = Σ over ranks of data[i]. The summation order is the backend's: not bit-stable.
  void all_reduce_sum(float* data, size_t count, std::chrono::milliseconds timeout);
  // Every rank's data becomes root's.
  void broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout);
  void barrier(std::chrono::milliseconds timeout);

  void set_observer(CollectiveObserver* observer) { observer_ = observer; }

  // The group's id, the same on every rank (TensorParallel draws it on rank 0 and broadcasts it),
  // carried by collective_begin with the collective's sequence number so that the agent can
  // compare the ranks of one group across nodes (docs/correlation.md). 0: none agreed yet.
  void set_group_id(uint64_t id) { group_id_ = id; }
  uint64_t group_id() const { return group_id_; }
  // Collectives begun on this communicator: every rank runs them in the same order, so the n-th
  // has the same number everywhere.
  uint64_t sequence() const { return sequence_; }

 protected:
  // Backends throw CollectiveError for failures they can classify (kTimeout needs this); any other
  // exception is reported as kError.
  virtual void do_all_gather(const float* in, size_t count, float* out, std::chrono::milliseconds timeout) = 0;
  virtual void do_all_reduce_sum(float* data, size_t count, std::chrono::milliseconds timeout) = 0;
  virtual void do_broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout) = 0;
  virtual void do_barrier(std::chrono::milliseconds timeout) = 0;

 private:
  template <typename F>
  void run(CollectiveOp op, size_t bytes, std::chrono::milliseconds timeout, F&& call);

  CollectiveObserver* observer_ = nullptr;
  uint64_t group_id_ = 0;
  uint64_t sequence_ = 0;
};

}  // namespace vigil
