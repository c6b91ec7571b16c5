// The serving engine: admits requests, batches every running sequence into one forward pass per
// step (continuous batching), streams tokens back, and frees everything a request held.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/caching_allocator.h"
#include "backend/forward_backend.h"
#include "backend/kv_blocks.h"
#include "engine/adapter_registry.h"
#include "engine/request.h"
#include "engine/scheduler_policy.h"
#include "engine/step_cost.h"
#include "engine/step_plan.h"
#include "model/vocab.h"

namespace vigil {

struct EngineConfig {
  int threads = 2;
  int kv_blocks = 512;            // KV cache size in blocks
  int kv_block_size = 16;         // positions per block
  int max_context = 2048;         // positions per sequence (prompt + generated)
  int max_running = 16;           // sequences decoded together (dynamic batching: MaxSize)
  int max_batched_tokens = 256;   // tokens per forward pass, prefill chunks included
  int max_waiting = 256;          // queued requests beyond which submit answers kQueueFull
  double batch_window_ms = 0.0;   // wait this long for more arrivals before a step from idle
  bool prefix_caching = true;     // reuse cached KV blocks of identical prompt prefixes
  PolicyKind policy = PolicyKind::kFcfs;  // `serve` defaults to token_budget (serving_engine_defaults)
  // token_budget: remaining tokens forgiven per second waited, so long requests cannot starve
  // (docs/performance.md: 200 keeps P99 TTFT at FCFS's with a lower median). 0: pure shortest-first.
  double token_budget_aging = 200;
  // Stall-free batching: while any sequence decodes, a step takes only the prompt tokens predicted
  // to keep it within the target (the engine learns its step costs as it runs), to the token; with
  // nothing decoding, prefill runs at max_batched_tokens. Off: every step up to max_batched_tokens.
  // Off for a bare engine (generate, tests: nothing to calibrate for); `serve` defaults to auto
  // (serving_engine_defaults).
  StepLatencyTarget step_latency_target;
  // The most prompt tokens of one request in a step (a fixed chunk, as Sarathi-Serve's); 0: only
  // max_batched_tokens and the target limit it.
  int max_prefill_chunk = 0;
};

// The sizes the engine's backend is built for: a step holds up to max_batched_tokens tokens, or
// one per running sequence, whichever is more.
BackendShape backend_shape(const EngineConfig& config);

enum class SubmitStatus { kAccepted, kQueueFull, kTooLong, kUnknownAdapter, kDraining, kInvalid };

struct SubmitResult {
  SubmitStatus status = SubmitStatus::kAccepted;
  uint64_t id = 0;      // with kAccepted: pass to cancel()
  std::string message;  // otherwise: why, for the client
};

// The step latency target and what the engine learned of its steps (engine.step_latency_target).
struct StepTargetStats {
  // Upper bounds of the prefill-chunk histogram (prompt tokens in a step that held decodes); the
  // last bucket is everything above.
  static constexpr std::array<int, 12> kChunkBounds{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  double target_seconds = 0;         // 0: off; with a multiple, the latest step's (or calibration's)
  double decode_multiple = 0;        // the target as a multiple of the decode step; 0: fixed or off
  double ceiling_seconds = 0;        // with a multiple: the most it may be; 0: uncapped
  double decode_step_seconds = 0;    // learned: a decode-only step of the latest step's decodes
  double prefill_token_seconds = 0;  // learned: one prompt token beside them, in the latest step's chunk
  double kv_row_seconds = 0;         // learned: the attention's cost a cached K/V row, for a decode
  double prefill_kv_row_seconds = 0; // learned: ... for a prompt token, in the latest step's chunk
  double overrun_seconds = 0;        // learned: the planner's headroom (StepCostModel::overrun_seconds)
  bool attainable = true;            // a decode-only step fits the target
  uint64_t steps = 0;                // steps that held decodes, target on
  uint64_t steps_over = 0;           // ... that took longer than the target
  std::array<uint64_t, kChunkBounds.size() + 1> chunk_counts{};  // per bucket, not cumulative
  uint64_t chunk_tokens = 0;
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  int kv_blocks_total = 0;
  int kv_blocks_free = 0;
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  uint64_t prefix_cache_queries = 0;  // prompt tokens looked up in the prefix cache
  uint64_t prefix_cache_hits = 0;     // of those, served from cached blocks
  AllocatorStats allocator;  // the caching allocator holding the KV cache
  std::optional<GraphStats> graphs;  // decode-graph counters of a GPU backend
  StepTargetStats step_target;
};

class Engine {
 public:
  // `adapters` (may be null: base model only) resolves RequestParams::adapter at submit.
  // `backend` was built for backend_shape(config) (backend/select builds it from the config's
  // backend section); the engine owns it from here.
  Engine(const LlamaModel& model, const Vocab& vocab, const EngineConfig& config, std::unique_ptr<ForwardBackend> backend,
         const AdapterRegistry* adapters = nullptr);
  ~Engine();  // stops the engine thread; unfinished requests end with kCancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. On kAccepted the sink gets events until one carries a finish reason.
  SubmitResult submit(RequestParams params, EventSink sink);
  // Thread-safe; the request ends with kCancelled at the next step boundary, its blocks freed.
  void cancel(uint64_t id);
  // Stops accepting (submit answers kDraining); running and queued requests continue.
  void drain();
  // True when draining and nothing is left to run.
  bool idle() const;
  EngineStats stats() const;

  const EngineConfig& config() const { return config_; }
  const std::string& backend_description() const { return backend_description_; }
  AdapterMemory adapter_memory() const { return backend_->adapter_memory(); }
  bool supports_lora() const { return backend_->supports_lora(); }

 private:
  struct Sequence;
  // Positions [begin, end) of seq->tokens computed in this step's forward pass.
  struct Slice {
    Sequence* seq;
    int begin, end;
  };
  void loop();
  // One scheduling step: admit, plan, one forward pass over every planned slice, sample, stream.
  void step();
  void admit();
  // The step's slices, decodes first, as engine/step_plan plans them, with the KV blocks found for
  // them: a sequence that does not fit preempts lower-ranked ones (counted in `preempted`) and the
  // step is planned again without them; one that fits not even then sits the step out.
  StepPlan plan_batch(std::vector<Slice>& slices, uint64_t& preempted);
  // Reserves KV blocks for `positions` of seq, preempting lower-ranked sequences while they do not
  // fit, those still in prefill first; returns how many it preempted.
  uint64_t make_room(Sequence& seq, int positions);
  void encode_batch(const std::vector<Slice>& plan);  // plan -> batch_
  // The forward pass over batch_; false when it threw (the planned sequences then ended in kError).
  bool run_forward(const std::vector<Slice>& plan);
  // Times a decode-only step at two depths, and prompt chunks of 1, 2, 4, ... 64 tokens beside one
  // decode, to seed the step cost model.
  void calibrate();
  // Learns from the step just run and accounts it against the latency target.
  void account_step(const StepPlan& step, double seconds);
  // Records what was computed and samples where a slice reached its last known token; returns the
  // sequences that finished (reason in pending.finish), events of the others already sent.
  std::vector<Sequence*> sample_tokens(const std::vector<Slice>& plan);
  // Appends a sampled token to seq and its pending event; kNone unless it ends the request.
  FinishReason append_token(Sequence& seq, int32_t token);
  void stream_pending(Sequence& seq);  // sends and clears the pending event of a running sequence
  void retire(const std::vector<Sequence*>& done);  // finishes them and drops them from running_
  void sort_by_policy(std::vector<std::unique_ptr<Sequence>>& list);
  void finish(Sequence& seq, FinishReason reason, const std::string& error = "");
  void publish_stats(uint64_t preempted);  // copies the engine thread's counts into stats_
  static bool decoding(const Sequence& seq);  // its next step computes one generated token

  const LlamaModel& model_;
  const Vocab& vocab_;
  const AdapterRegistry* adapters_;
  EngineConfig config_;
  KvBlockAllocator blocks_;
  std::unique_ptr<ForwardBackend> backend_;  // owns the KV storage blocks_ numbers
  std::string backend_description_;
  std::unique_ptr<SchedulerPolicy> policy_;
  StepCostModel step_cost_;      // engine thread only (and the constructor, before it starts)
  StepTargetStats step_target_;  // engine thread's copy, published into stats_ after each step

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> incoming_;  // submitted, not yet seen by the loop
  std::vector<uint64_t> cancelled_;
  bool stop_ = false;
  bool draining_ = false;
  uint64_t next_id_ = 1;
  EngineStats stats_;

  // Owned by the engine thread.
  std::vector<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<BatchToken> batch_;
  std::thread thread_;
};

}  // namespace vigil
