// Metric definitions: names in base units (seconds, tokens as counts), buckets sized for a model
// that decodes a token in milliseconds on a CPU and runs requests for seconds to minutes.
#include "server/worker_metrics.h"

#include <prometheus/text_serializer.h>

namespace vigil {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                                  0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const Histogram::BucketBoundaries kItlBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02,
                                                 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                                 0.75, 1.0, 2.5};
const Histogram::BucketBoundaries kE2eBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                                                 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
const Histogram::BucketBoundaries kQueueBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
const Histogram::BucketBoundaries kLengthBuckets = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000,
                                                    10000, 20000, 50000, 100000};

const char* rejection_name(int i) {
  static constexpr const char* kNames[kRejectionCount] = {"invalid", "too_long", "not_found",
                                                          "queue_full", "draining", "engine_error",
                                                          "too_many_connections", "unauthorized",
                                                          "too_many_requests"};
  return kNames[i];
}

// Counters mirror cumulative engine counts: add what is new since the last scrape.
void advance(prometheus::Counter& counter, uint64_t& seen, uint64_t now) {
  if (now > seen) counter.Increment(static_cast<double>(now - seen));
  seen = now;
}

}  // namespace

WorkerMetrics::WorkerMetrics(const std::string& model, std::string_view version, const BackendDevice& device,
                             const WeightsMemory& weights)
    : running_(BuildGauge().Name("vigil_worker_requests_running").Help("Requests in the running batch.")
                   .Register(*registry_).Add({})),
      waiting_(BuildGauge().Name("vigil_worker_requests_waiting").Help("Requests queued for admission.")
                   .Register(*registry_).Add({})),
      kv_usage_(BuildGauge().Name("vigil_worker_kv_cache_usage_ratio")
                    .Help("Fraction of KV cache blocks in use (0-1).").Register(*registry_).Add({})),
      preemptions_(BuildCounter().Name("vigil_worker_preemptions_total")
                       .Help("Sequences preempted (recomputed later) because KV blocks ran out.")
                       .Register(*registry_).Add({})),
      prefix_queries_(BuildCounter().Name("vigil_worker_prefix_cache_queries_total")
                          .Help("Prompt tokens looked up in the prefix cache.").Register(*registry_).Add({})),
      prefix_hits_(BuildCounter().Name("vigil_worker_prefix_cache_hits_total")
                       .Help("Prompt tokens served from cached KV blocks instead of computed.")
                       .Register(*registry_).Add({})),
      alloc_reserved_(BuildGauge().Name("vigil_worker_allocator_reserved_bytes")
                          .Help("Bytes the caching allocator holds in segments from the backend.")
                          .Register(*registry_).Add({})),
      alloc_allocated_(BuildGauge().Name("vigil_worker_allocator_allocated_bytes")
                           .Help("Bytes of the caching allocator handed out in blocks.")
                           .Register(*registry_).Add({})),
      alloc_largest_free_(BuildGauge().Name("vigil_worker_allocator_largest_free_block_bytes")
                              .Help("Largest free block inside the allocator's reserved memory.")
                              .Register(*registry_).Add({})),
      alloc_fragmentation_(BuildGauge().Name("vigil_worker_allocator_fragmentation_ratio")
                               .Help("1 - largest free block / free bytes inside reserved memory (0-1).")
                               .Register(*registry_).Add({})),
      alloc_blocks_(BuildGauge().Name("vigil_worker_allocator_blocks")
                        .Help("Blocks the caching allocator has handed out and not taken back.")
                        .Register(*registry_).Add({})),
      prompt_tokens_(BuildCounter().Name("vigil_worker_prompt_tokens_total")
                         .Help("Prompt tokens of finished requests.").Register(*registry_).Add({})),
      generation_tokens_(BuildCounter().Name("vigil_worker_generation_tokens_total")
                             .Help("Generated tokens of finished requests.").Register(*registry_).Add({})),
      ttft_(BuildHistogram().Name("vigil_worker_time_to_first_token_seconds")
                .Help("Time from a request's arrival to its first generated token.")
                .Register(*registry_).Add({}, kTtftBuckets)),
      itl_(BuildHistogram().Name("vigil_worker_inter_token_latency_seconds")
               .Help("Time between consecutive generated tokens of a request.")
               .Register(*registry_).Add({}, kItlBuckets)),
      e2e_(BuildHistogram().Name("vigil_worker_e2e_request_latency_seconds")
               .Help("Time from a request's arrival to its last token.").Register(*registry_).Add({}, kE2eBuckets)),
      queue_(BuildHistogram().Name("vigil_worker_request_queue_time_seconds")
                 .Help("Time a request waited before the engine admitted it.")
                 .Register(*registry_).Add({}, kQueueBuckets)),
      prompt_len_(BuildHistogram().Name("vigil_worker_request_prompt_tokens")
                      .Help("Prompt length of finished requests, in tokens.")
                      .Register(*registry_).Add({}, kLengthBuckets)),
      generation_len_(BuildHistogram().Name("vigil_worker_request_generation_tokens")
                          .Help("Generated length of finished requests, in tokens.")
                          .Register(*registry_).Add({}, kLengthBuckets)),
      step_target_(BuildGauge().Name("vigil_worker_step_latency_target_seconds")
                       .Help("engine.step_latency_target: the step length prompt chunks are sized for while "
                             "sequences decode (0: off); with a multiple of the decode step (auto, 2x), the latest "
                             "step's.")
                       .Register(*registry_).Add({})) {
  auto& success = BuildCounter().Name("vigil_worker_request_success_total")
                      .Help("Finished requests by finish reason.").Register(*registry_);
  for (auto reason : {FinishReason::kStop, FinishReason::kLength, FinishReason::kCancelled, FinishReason::kError})
    success_[static_cast<size_t>(reason) - 1] = &success.Add({{"finish_reason", finish_reason_name(reason)}});
  auto& rejected = BuildCounter().Name("vigil_worker_requests_rejected_total")
                       .Help("Requests answered with an error before they ran, by reason.").Register(*registry_);
  for (int i = 0; i < kRejectionCount; ++i) rejected_[static_cast<size_t>(i)] = &rejected.Add({{"reason", rejection_name(i)}});
  BuildGauge().Name("vigil_worker_info")
      .Help("The served model, the build, the forward backend, the active CPU kernel path, the CPU model and "
            "where the weights sit (huge_pages: a private copy in transparent huge pages; page_cache: the file's "
            "mapping).")
      .Register(*registry_)
      .Add({{"model", model}, {"version", std::string(version)}, {"kernel_path", device.kernel_path},
            {"backend", device.kind}, {"cpu_model", device.cpu_model}, {"weights", std::string(weights.placement)}})
      .Set(1);
  BuildGauge().Name("vigil_worker_weights_bytes").Help("Bytes of the model file held in memory for the forward pass.")
      .Register(*registry_).Add({}).Set(static_cast<double>(weights.bytes));
  BuildGauge().Name("vigil_worker_weights_pmd_mapped_bytes")
      .Help("Of vigil_worker_weights_bytes, those the kernel mapped with 2 MiB page-table entries at start "
            "(/proc/self/smaps): a decode step streams them faster than 4 KiB pages.")
      .Register(*registry_).Add({}).Set(static_cast<double>(weights.pmd_mapped_bytes));
  lora_loaded_ = &BuildGauge().Name("vigil_worker_lora_adapters_loaded").Help("LoRA adapters loaded now.")
                      .Register(*registry_).Add({});
  lora_requests_family_ = &BuildCounter().Name("vigil_worker_lora_requests_total")
                               .Help("Requests accepted on a LoRA adapter, by adapter.").Register(*registry_);
}

void WorkerMetrics::request_queued(double queue_seconds) { queue_.Observe(queue_seconds); }

void WorkerMetrics::first_token(double ttft_seconds) { ttft_.Observe(ttft_seconds); }

void WorkerMetrics::tokens_after(double gap_seconds, size_t tokens) {
  if (tokens == 0) return;
  const double each = gap_seconds / static_cast<double>(tokens);
  for (size_t i = 0; i < tokens; ++i) itl_.Observe(each);
}

void WorkerMetrics::request_finished(FinishReason reason, int prompt_tokens, int generation_tokens,
                                     double e2e_seconds) {
  if (reason != FinishReason::kNone) success_[static_cast<size_t>(reason) - 1]->Increment();
  prompt_tokens_.Increment(prompt_tokens);
  generation_tokens_.Increment(generation_tokens);
  prompt_len_.Observe(prompt_tokens);
  generation_len_.Observe(generation_tokens);
  e2e_.Observe(e2e_seconds);
}

void WorkerMetrics::rejected(Rejection why) { rejected_[static_cast<size_t>(why)]->Increment(); }

void WorkerMetrics::lora_adapters_loaded(size_t n) { lora_loaded_->Set(static_cast<double>(n)); }

void WorkerMetrics::lora_request(const std::string& adapter) {
  std::lock_guard lock(lora_mu_);
  auto it = lora_requests_.find(adapter);
  if (it == lora_requests_.end()) it = lora_requests_.emplace(adapter, &lora_requests_family_->Add({{"adapter", adapter}})).first;
  it->second->Increment();
}

std::string WorkerMetrics::scrape(const EngineStats& stats) {
  std::lock_guard lock(scrape_mu_);
  running_.Set(stats.running);
  waiting_.Set(stats.waiting);
  kv_usage_.Set(stats.kv_blocks_total > 0
                    ? 1.0 - static_cast<double>(stats.kv_blocks_free) / static_cast<double>(stats.kv_blocks_total)
                    : 0.0);
  alloc_reserved_.Set(static_cast<double>(stats.allocator.reserved_bytes));
  alloc_allocated_.Set(static_cast<double>(stats.allocator.allocated_bytes));
  alloc_largest_free_.Set(static_cast<double>(stats.allocator.largest_free_block));
  alloc_fragmentation_.Set(stats.allocator.external_fragmentation());
  alloc_blocks_.Set(static_cast<double>(stats.allocator.blocks));
  advance(prefix_queries_, prefix_queries_seen_, stats.prefix_cache_queries);
  advance(prefix_hits_, prefix_hits_seen_, stats.prefix_cache_hits);
  advance(preemptions_, preemptions_seen_, stats.preemptions);
  if (stats.graphs) scrape_graphs(*stats.graphs);
  step_target_.Set(stats.step_target.target_seconds);
  if (stats.step_target.target_seconds > 0) scrape_step_target(stats.step_target);
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void WorkerMetrics::scrape_graphs(const GraphStats& now) {
  if (!graphs_) {
    auto counter = [&](const char* name, const char* help) -> prometheus::Counter& {
      return BuildCounter().Name(name).Help(help).Register(*registry_).Add({});
    };
    auto& eager = BuildCounter().Name("vigil_worker_cuda_graph_eager_steps_total")
                      .Help("Decode steps run without a CUDA Graph, by reason.").Register(*registry_);
    graphs_ = std::make_unique<GraphSeries>(GraphSeries{
        &counter("vigil_worker_cuda_graph_captures_total", "Decode graphs captured and instantiated."),
        &counter("vigil_worker_cuda_graph_capture_failures_total",
                 "Decode graph captures or instantiations that failed (the bucket then runs eagerly)."),
        &counter("vigil_worker_cuda_graph_launches_total", "Decode steps replayed from a CUDA Graph."),
        &counter("vigil_worker_cuda_graph_launch_failures_total", "CUDA Graph replays that failed."),
        &eager.Add({{"reason", "disabled"}}), &eager.Add({{"reason", "no_bucket"}}),
        &eager.Add({{"reason", "failed_bucket"}}), GraphStats{}});
  }
  GraphSeries& g = *graphs_;
  advance(*g.captures, g.seen.captures, now.captures);
  advance(*g.capture_failures, g.seen.capture_failures, now.capture_failures);
  advance(*g.launches, g.seen.launches, now.launches);
  advance(*g.launch_failures, g.seen.launch_failures, now.launch_failures);
  advance(*g.eager_disabled, g.seen.fallback_disabled, now.fallback_disabled);
  advance(*g.eager_no_bucket, g.seen.fallback_no_bucket, now.fallback_no_bucket);
  advance(*g.eager_failed_bucket, g.seen.fallback_failed_bucket, now.fallback_failed_bucket);
}

void WorkerMetrics::scrape_step_target(const StepTargetStats& now) {
  if (!step_series_) {
    auto gauge = [&](const char* name, const char* help, const prometheus::Labels& labels = {}) -> prometheus::Gauge& {
      return BuildGauge().Name(name).Help(help).Register(*registry_).Add(labels);
    };
    auto& cost = BuildGauge().Name("vigil_worker_step_cost_seconds")
                     .Help("What the engine learned a step costs: a decode-only step of the latest step's decodes "
                           "(part=decode_step), one prompt token beside them in a chunk of the latest step's "
                           "size (part=prefill_token), the attention reading one cached K/V row for a decode (part=kv_row) "
                           "and for a prompt token of such a chunk (part=prefill_kv_row), and how much "
                           "longer than predicted a step with prompt tokens runs, bar the worst 1 % (part=overrun: "
                           "the share of the latency target the engine leaves unplanned).")
                     .Register(*registry_);
    prometheus::Histogram::BucketBoundaries bounds(StepTargetStats::kChunkBounds.begin(),
                                                   StepTargetStats::kChunkBounds.end());
    step_series_ = std::make_unique<StepTargetSeries>(StepTargetSeries{
        &cost.Add({{"part", "decode_step"}}), &cost.Add({{"part", "prefill_token"}}), &cost.Add({{"part", "kv_row"}}),
        &cost.Add({{"part", "prefill_kv_row"}}),
        &cost.Add({{"part", "overrun"}}),
        &gauge("vigil_worker_step_latency_target_attainable",
               "1 when a decode-only step of the current batch fits engine.step_latency_target, 0 when even "
               "that is longer (the target cannot be met: raise it or run fewer sequences)."),
        &BuildCounter().Name("vigil_worker_decode_steps_total")
             .Help("Steps that held decoding sequences, with a step latency target set.").Register(*registry_).Add({}),
        &BuildCounter().Name("vigil_worker_decode_steps_over_target_total")
             .Help("Of those, steps that took longer than engine.step_latency_target.").Register(*registry_).Add({}),
        &BuildHistogram().Name("vigil_worker_step_prefill_chunk_tokens")
             .Help("Prompt tokens in each step that held decoding sequences: the chunk the latency target allowed.")
             .Register(*registry_).Add({}, bounds),
        StepTargetStats{}});
  }
  StepTargetSeries& t = *step_series_;
  t.decode_step->Set(now.decode_step_seconds);
  t.prefill_token->Set(now.prefill_token_seconds);
  t.kv_row->Set(now.kv_row_seconds);
  t.prefill_kv_row->Set(now.prefill_kv_row_seconds);
  t.overrun->Set(now.overrun_seconds);
  t.attainable->Set(now.attainable ? 1 : 0);
  advance(*t.steps, t.seen.steps, now.steps);
  advance(*t.steps_over, t.seen.steps_over, now.steps_over);
  std::vector<double> increments(now.chunk_counts.size());
  for (size_t i = 0; i < increments.size(); ++i)
    increments[i] = static_cast<double>(now.chunk_counts[i] - t.seen.chunk_counts[i]);
  t.chunks->ObserveMultiple(increments, static_cast<double>(now.chunk_tokens - t.seen.chunk_tokens));
  t.seen.chunk_counts = now.chunk_counts;
  t.seen.chunk_tokens = now.chunk_tokens;
}

}  // namespace vigil
