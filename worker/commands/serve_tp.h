// `vigil-worker serve --tp N`: the flags, the Gloo group and the process policy of tensor-parallel
// serving (leader: metrics, heartbeat, exit 3 on a failed collective; follower: run the CPU
// backend's follower loop). Protocol and launch: docs/tensor-parallel.md.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <prometheus/registry.h>

#include "backend/forward_backend.h"
#include "comm/collective_metrics.h"
#include "comm/gloo_communicator.h"
#include "comm/tensor_parallel.h"
#include "engine/engine.h"
#include "model/llama_model.h"

namespace vigil {

inline constexpr const char* kTpUsage =
    "\n"
    "Tensor parallelism (one process per rank; rank 0 serves HTTP, the others follow its batches):\n"
    "  --tp N             ranks in the group (default 1: no tensor parallelism)\n"
    "  --rank R           this process's rank, 0..N-1\n"
    "  --tp-store DIR     rendezvous directory shared by all ranks; fresh for every launch\n"
    "  --tp-iface IF      network interface to listen on for the other ranks (e.g. eth0)\n"
    "  --tp-host ADDR     or the address to listen on (default: the host name's address)\n"
    "  --tp-timeout DUR   every collective's timeout (default 30s); a timed-out or failed\n"
    "                     collective is logged, counted, traced (USDT collective_end, status != 0),\n"
    "                     fails the requests of that step, and the rank exits 3 for its\n"
    "                     orchestrator to restart the group\n";

struct TpOptions {
  int world = 1;
  int rank = 0;
  std::string store, iface, host;
  std::chrono::milliseconds timeout{30000};
};

// Takes `value` for flag `flag` when it is a tensor-parallel flag; returns false when it is not.
// Throws std::invalid_argument for a bad value.
bool parse_tp_flag(const std::string& flag, const std::string& value, TpOptions& options);
bool is_tp_flag(const std::string& flag);
// Cross-flag checks once every flag is read; throws std::invalid_argument.
void check_tp_options(const TpOptions& options);

class TpGroup {
 public:
  // Joins the group and checks that every rank runs the same model shape and engine geometry.
  TpGroup(const TpOptions& options, const LlamaModel& model, const EngineConfig& engine);

  bool leader() const { return tp_.leader(); }
  // The group the CPU backend splits its products over (backend/select's make_backend).
  TensorParallel& group() { return tp_; }
  // Leader: vigil_worker_collective_* on the worker's registry; the heartbeat starts.
  void serve(prometheus::Registry& registry);
  // Follower: runs the leader's batches until it says shutdown (0) or a collective fails (3).
  int follow(const LlamaModel& model, const EngineConfig& engine);
  // Leader, after the engine stopped: tells the followers to exit.
  void finish();

 private:
  TpOptions options_;
  GlooCommunicator comm_;
  TensorParallel tp_;
  std::unique_ptr<CollectiveMetrics> metrics_;
};

}  // namespace vigil
