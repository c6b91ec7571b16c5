// Tensor-parallel serving around the engine: flags, the group, and the process policy. The
// follower's loop and the split products are the CPU backend's. The failure policy is "exit 3": after a timeout the
// peers may be in different collectives and Gloo's pairs hold half-done transfers, so the only
// sound recovery is a fresh group; the orchestrator restarts both ranks (Kubernetes: one pod with
// both ranks, or a StatefulSet with a fresh rendezvous directory per start).
#include "commands/serve_tp.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "backend/cpu/tp_follower.h"
#include "backend/select/backend_select.h"
#include "server/serve_config.h"

namespace vigil {
namespace {

int to_int(const std::string& flag, const std::string& v, int lo, int hi) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || n < lo || n > hi)
    throw std::invalid_argument(flag + ": expected " + std::to_string(lo) + "-" + std::to_string(hi) + ", got '" + v + "'");
  return n;
}

GlooOptions gloo_options(const TpOptions& o) {
  GlooOptions g;
  g.rank = o.rank;
  g.world = o.world;
  g.store_dir = o.store;
  g.iface = o.iface;
  g.host = o.host;
  return g;
}

void report(const CollectiveError& e, int rank) {
  std::fprintf(stderr, "vigil-worker: rank %d: tensor-parallel collective failed: %s\n", rank, e.what());
}

}  // namespace

bool is_tp_flag(const std::string& f) {
  return f == "--tp" || f == "--rank" || f == "--tp-store" || f == "--tp-iface" || f == "--tp-host" ||
         f == "--tp-timeout";
}

bool parse_tp_flag(const std::string& flag, const std::string& value, TpOptions& o) {
  if (flag == "--tp") o.world = to_int(flag, value, 1, 64);
  else if (flag == "--rank") o.rank = to_int(flag, value, 0, 63);
  else if (flag == "--tp-store") o.store = value;
  else if (flag == "--tp-iface") o.iface = value;
  else if (flag == "--tp-host") o.host = value;
  else if (flag == "--tp-timeout") {
    try {
      o.timeout = parse_duration(value);
    } catch (const std::exception& e) {
      throw std::invalid_argument(flag + ": " + e.what());
    }
    if (o.timeout.count() <= 0) throw std::invalid_argument(flag + ": must be positive");
  } else {
    return false;
  }
  return true;
}

void check_tp_options(const TpOptions& o) {
  if (o.rank >= o.world)
    throw std::invalid_argument("--rank " + std::to_string(o.rank) + " is outside --tp " + std::to_string(o.world));
  if (o.world > 1 && o.store.empty()) throw std::invalid_argument("--tp-store DIR is required with --tp > 1");
}

TpGroup::TpGroup(const TpOptions& options, const LlamaModel& model, const EngineConfig& e)
    : options_(options), comm_(gloo_options(options)), tp_(comm_, options.timeout) {
  const LlamaHparams& hp = model.hparams();
  tp_.check_same_on_all_ranks({{"n_layer", hp.n_layer},
                               {"n_embd", hp.n_embd},
                               {"n_ff", hp.n_ff},
                               {"n_vocab", hp.n_vocab},
                               {"kv_dim", hp.kv_dim()},
                               {"engine.kv_blocks", e.kv_blocks},
                               {"engine.kv_block_size", e.kv_block_size},
                               {"engine.max_context", e.max_context},
                               {"engine.max_batch", backend_shape(e).max_batch},
                               {"tp timeout ms", options.timeout.count()}});
  std::fprintf(stderr, "vigil-worker: rank %d of %d joined the tensor-parallel group (gloo, timeout %lld ms)\n",
               options.rank, options.world, static_cast<long long>(options.timeout.count()));
}

void TpGroup::serve(prometheus::Registry& registry) {
  metrics_ = std::make_unique<CollectiveMetrics>(registry, comm_, options_.timeout);
  comm_.set_observer(metrics_.get());
  const int rank = options_.rank;
  tp_.set_failure_handler([rank](const CollectiveError& e) {
    report(e, rank);
    std::fprintf(stderr, "vigil-worker: rank %d: failing the step's requests and exiting 3\n", rank);
    // The engine thread answers the step's requests with the error; a moment lets those answers
    // reach their clients before the process goes.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::_Exit(3);
    }).detach();
  });
  tp_.start_heartbeat();
}

int TpGroup::follow(const LlamaModel& model, const EngineConfig& e) {
  // The leader's engine shape, checked equal on every rank at the join.
  const std::unique_ptr<ForwardBackend> backend = make_backend(BackendConfig{}, model, backend_shape(e), &tp_);
  std::fprintf(stderr, "vigil-worker: rank %d following rank 0's batches\n", options_.rank);
  try {
    follow_leader(*backend, tp_);
    return 0;
  } catch (const CollectiveError& err) {
    report(err, options_.rank);
    std::fprintf(stderr, "vigil-worker: rank %d: exiting 3\n", options_.rank);
    return 3;
  }
}

void TpGroup::finish() {
  try {
    tp_.send_shutdown();
  } catch (const CollectiveError& e) {
    report(e, options_.rank);
  }
}

}  // namespace vigil
