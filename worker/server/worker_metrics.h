// The worker's Prometheus metrics (vigil_worker_*): every series is created once here, so request
// paths only touch references, never Family::Add.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "engine/engine.h"

namespace vigil {

// Why a request was turned away before the engine ran it (label `reason`).
enum class Rejection { kInvalid, kTooLong, kNotFound, kQueueFull, kDraining, kEngineError, kTooManyConnections,
                       kUnauthorized, kTooManyRequests };
inline constexpr int kRejectionCount = 9;

// Where the weights sit (model/mapped_file.h), as loaded: decode speed depends on it.
struct WeightsMemory {
  std::string_view placement;     // weights_placement_name(): vigil_worker_info's `weights` label
  uint64_t bytes = 0;             // vigil_worker_weights_bytes
  uint64_t pmd_mapped_bytes = 0;  // vigil_worker_weights_pmd_mapped_bytes, from /proc/self/smaps
};

class WorkerMetrics {
 public:
  // `device`: what the forward backend runs on (ForwardBackend::device()): vigil_worker_info's
  // backend, kernel_path and cpu_model labels, so a pod's speed can be read beside the machine it
  // runs on; `weights`: where the weights it reads sit.
  WorkerMetrics(const std::string& model, std::string_view version, const BackendDevice& device,
                const WeightsMemory& weights);

  void request_queued(double queue_seconds);
  void first_token(double ttft_seconds);
  // `tokens` tokens arrived `gap_seconds` after the previous ones (one event may carry several).
  void tokens_after(double gap_seconds, size_t tokens);
  void request_finished(FinishReason reason, int prompt_tokens, int generation_tokens, double e2e_seconds);
  void rejected(Rejection why);
  // LoRA adapters: how many are loaded now; one more request accepted on `adapter`.
  void lora_adapters_loaded(size_t n);
  void lora_request(const std::string& adapter);

  // For metrics owned elsewhere (the collectives'), served on the same /metrics.
  prometheus::Registry& registry() { return *registry_; }

  // Text exposition format, with the engine's gauges read now.
  std::string scrape(const EngineStats& stats);

 private:
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Gauge& running_;
  prometheus::Gauge& waiting_;
  prometheus::Gauge& kv_usage_;
  prometheus::Counter& preemptions_;
  prometheus::Counter& prefix_queries_;
  prometheus::Counter& prefix_hits_;
  uint64_t prefix_queries_seen_ = 0;
  uint64_t prefix_hits_seen_ = 0;
  prometheus::Gauge& alloc_reserved_;
  prometheus::Gauge& alloc_allocated_;
  prometheus::Gauge& alloc_largest_free_;
  prometheus::Gauge& alloc_fragmentation_;
  prometheus::Gauge& alloc_blocks_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generation_tokens_;
  std::array<prometheus::Counter*, 4> success_{};  // by FinishReason (kStop .. kError)
  std::array<prometheus::Counter*, kRejectionCount> rejected_{};
  prometheus::Histogram& ttft_;
  prometheus::Histogram& itl_;
  prometheus::Histogram& e2e_;
  prometheus::Histogram& queue_;
  prometheus::Histogram& prompt_len_;
  prometheus::Histogram& generation_len_;

  // CUDA Graph counters, created at the first scrape whose stats carry them (GPU backends only),
  // so a CPU worker exposes no always-zero graph series.
  struct GraphSeries {
    prometheus::Counter *captures, *capture_failures, *launches, *launch_failures;
    prometheus::Counter *eager_disabled, *eager_no_bucket, *eager_failed_bucket;
    GraphStats seen;
  };
  void scrape_graphs(const GraphStats& stats);
  std::unique_ptr<GraphSeries> graphs_;

  // engine.step_latency_target: the target is always exported (0: off); what the engine learned
  // and how steps held to it, from the first scrape with a target set.
  prometheus::Gauge& step_target_;
  struct StepTargetSeries {
    prometheus::Gauge *decode_step, *prefill_token, *kv_row, *prefill_kv_row, *overrun, *attainable;
    prometheus::Counter *steps, *steps_over;
    prometheus::Histogram* chunks;
    StepTargetStats seen;
  };
  void scrape_step_target(const StepTargetStats& stats);
  std::unique_ptr<StepTargetSeries> step_series_;

  std::mutex scrape_mu_;        // scrapes may come from several I/O threads
  // An adapter's series is added on its first request and reused after; names are bounded by
  // what operators load (at most kMaxAdapters at a time).
  prometheus::Gauge* lora_loaded_ = nullptr;
  prometheus::Family<prometheus::Counter>* lora_requests_family_ = nullptr;
  std::mutex lora_mu_;
  std::map<std::string, prometheus::Counter*, std::less<>> lora_requests_;
  uint64_t preemptions_seen_ = 0;  // engine's cumulative count at the last scrape
};

}  // namespace vigil
