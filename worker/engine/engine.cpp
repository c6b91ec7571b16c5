// The serving engine: admits requests, batches every running sequence into one forward pass per
// step (continuous batching), streams tokens back, and frees everything a request held.
//
// One engine thread owns the forward backend, the KV cache and every sequence; other threads only
// hand requests and cancellations over through `incoming_` and `cancelled_` under the mutex.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "base/probes.h"

namespace vigil {

using Clock = std::chrono::steady_clock;

struct Engine::Sequence {
  Sequence(uint64_t id_, RequestParams p, EventSink s, const Vocab& vocab, int n_vocab)
      : id(id_), params(std::move(p)), sink(std::move(s)), sampler(params.sampling, n_vocab),
        output(vocab, params.stop, params.max_tokens, params.ignore_eos), tokens(params.prompt),
        n_prompt(static_cast<int>(params.prompt.size())) {}

  SchedulingKey key(Clock::time_point now) const {
    return {id, params.priority, (static_cast<int>(tokens.size()) - n_computed) + (params.max_tokens - n_generated()),
            std::chrono::duration<double>(now - submitted).count()};
  }

  uint64_t id;
  RequestParams params;
  EventSink sink;
  Sampler sampler;
  SequenceOutput output;         // its text, its end, the count of generated tokens
  std::vector<int32_t> tokens;  // prompt, then generated: recomputed from here after preemption
  int n_prompt;
  int n_computed = 0;           // positions whose K/V are in the cache
  int n_generated() const { return output.generated(); }
  KvSequence kv;
  std::shared_ptr<const LoraAdapter> adapter;  // held until the request ends, even if unloaded
  // Cached KV blocks are shared only between sequences of the same adapter (or none).
  uint64_t cache_root() const { return adapter ? adapter->id() : 0; }
  Clock::time_point submitted = Clock::now();
  SchedulingKey sort_key;       // key() at the last sort_by_policy
  bool reported_queue_time = false;
  RequestEvent pending;         // what this step produced, sent after the step
};

Engine::Engine(const LlamaModel& model, const Vocab& vocab, const EngineConfig& config,
               std::unique_ptr<ForwardBackend> backend, const AdapterRegistry* adapters)
    : model_(model),
      vocab_(vocab),
      adapters_(adapters),
      config_(config),
      blocks_(config.kv_blocks),
      backend_(std::move(backend)),
      backend_description_(backend_->describe()),
      policy_(make_policy(config.policy, config.token_budget_aging)) {
  stats_.kv_blocks_total = config.kv_blocks;
  stats_.kv_blocks_free = config.kv_blocks;
  stats_.graphs = backend_->graph_stats();
  batch_.reserve(static_cast<size_t>(std::max(config.max_batched_tokens, config.max_running)));
  step_target_.decode_multiple = config.step_latency_target.decode_multiple;
  step_target_.ceiling_seconds = std::chrono::duration<double>(config.step_latency_target.ceiling).count();
  if (config.step_latency_target.on()) calibrate();
  stats_.step_target = step_target_;
  thread_ = std::thread([this] { loop(); });
}

void Engine::calibrate() {
  // On the constructing thread, where the backend was made (a CUDA device is current there). A
  // decoding sequence timed with `context` positions behind it and again with `deep` (which
  // teaches the cost of a cached K/V row), and a prompt whose first `chunk_max` positions are
  // computed again and again as chunks of each size class up to 64 beside it.
  const int capacity = config_.kv_block_size * (config_.kv_blocks / 2) - 1;
  const int context = std::min({64, config_.max_batched_tokens, config_.max_context - 1, capacity});
  const int deep = std::min({512, config_.max_context - 1, capacity});
  const int chunk_max = std::min({64, config_.max_batched_tokens - 1, config_.max_context, capacity + 1});
  KvSequence decoder, prompt;
  if (context < 1 || chunk_max < 1 || !blocks_.reserve(decoder, std::max(context, deep) + 1, config_.kv_block_size) ||
      !blocks_.reserve(prompt, chunk_max, config_.kv_block_size)) {
    blocks_.release(decoder);
    step_target_.target_seconds = step_target_seconds(config_.step_latency_target, step_cost_, 1, 0);  // steps will teach it
    return;
  }
  const int32_t vocab = model_.hparams().n_vocab;
  auto prefill = [&](int from, int to) {  // the decoder's positions [from, to), as a prompt
    for (int begin = from; begin < to; begin += config_.max_batched_tokens) {
      batch_.clear();
      for (int p = begin; p < std::min(to, begin + config_.max_batched_tokens); ++p)
        batch_.push_back({.token = p % vocab, .pos = p, .seq = &decoder, .want_logits = p + 1 == to});
      backend_->forward(batch_);
    }
  };
  auto run = [&](int decode_pos, int prompt_tokens) {
    batch_.clear();
    batch_.push_back(
        {.token = decode_pos % vocab, .pos = decode_pos, .seq = &decoder, .want_logits = true, .generated = true});
    for (int p = 0; p < prompt_tokens; ++p)
      batch_.push_back({.token = p % vocab, .pos = p, .seq = &prompt, .want_logits = p + 1 == prompt_tokens});
    const auto start = Clock::now();
    backend_->forward(batch_);
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  // The fastest of three decodes at a depth (also pages the weights in, with the prefill).
  auto time_decode = [&](int pos) {
    const double seconds = std::min({run(pos, 0), run(pos, 0), run(pos, 0)});
    step_cost_.observe({.decode_tokens = 1, .decode_kv_rows = pos + 1}, seconds);
  };
  prefill(0, context);
  time_decode(context);
  int at = context;
  if (deep > context) {
    prefill(context, deep);
    time_decode(deep);
    at = deep;
  }
  // The fastest of two runs of each chunk: one-token chunks are within the noise of one step.
  for (int chunk = 1; chunk <= chunk_max; chunk *= 2)
    step_cost_.observe({1, chunk, at + 1, prompt_kv_rows(0, chunk)}, std::min(run(at, chunk), run(at, chunk)));
  blocks_.release(decoder);  // never published: the prefix cache does not see these positions
  blocks_.release(prompt);
  step_target_.target_seconds = step_target_seconds(config_.step_latency_target, step_cost_, 1, context + 1);
  step_target_.decode_step_seconds = step_cost_.decode_seconds(1, context + 1);
  // The largest chunk's: a one-token chunk's cost can be lost in one step's noise on a small model.
  step_target_.prefill_token_seconds = step_cost_.prefill_token_seconds(chunk_max);
  step_target_.kv_row_seconds = step_cost_.kv_row_seconds();
  step_target_.prefill_kv_row_seconds = step_cost_.prefill_kv_row_seconds(chunk_max);
  step_target_.attainable = step_target_.decode_step_seconds <= step_target_.target_seconds;
}

BackendShape backend_shape(const EngineConfig& config) {
  return {std::max(config.max_batched_tokens, config.max_running), config.max_running, config.max_context,
          config.kv_blocks, config.kv_block_size, config.threads};
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

SubmitResult Engine::submit(RequestParams params, EventSink sink) {
  if (params.prompt.empty()) return {SubmitStatus::kInvalid, 0, "prompt: must not be empty"};
  if (params.max_tokens < 1) return {SubmitStatus::kInvalid, 0, "max_tokens: must be at least 1"};
  if (std::string err = params.sampling.validate(); !err.empty()) return {SubmitStatus::kInvalid, 0, err};
  for (int32_t t : params.prompt)
    if (t < 0 || t >= static_cast<int32_t>(vocab_.size()))
      return {SubmitStatus::kInvalid, 0, "prompt: token id " + std::to_string(t) + " outside the vocabulary"};
  const size_t total = params.prompt.size() + static_cast<size_t>(params.max_tokens);
  const size_t cache_positions = static_cast<size_t>(config_.kv_blocks) * static_cast<size_t>(config_.kv_block_size);
  if (total > static_cast<size_t>(config_.max_context) || total > cache_positions)
    return {SubmitStatus::kTooLong, 0,
            "prompt (" + std::to_string(params.prompt.size()) + " tokens) + max_tokens (" +
                std::to_string(params.max_tokens) + ") exceeds the context of " +
                std::to_string(std::min(static_cast<size_t>(config_.max_context), cache_positions)) + " tokens"};
  std::shared_ptr<const LoraAdapter> adapter;
  if (!params.adapter.empty()) {
    if (!backend_->supports_lora())
      return {SubmitStatus::kInvalid, 0, "adapter: LoRA adapters are not supported by the " + backend_description_};
    if (adapters_) adapter = adapters_->find(params.adapter);
    if (!adapter) return {SubmitStatus::kUnknownAdapter, 0, "adapter '" + params.adapter + "' is not loaded"};
  }

  std::lock_guard lock(mu_);
  if (draining_ || stop_) return {SubmitStatus::kDraining, 0, "the worker is shutting down"};
  if (stats_.waiting + static_cast<int>(incoming_.size()) >= config_.max_waiting)
    return {SubmitStatus::kQueueFull, 0, "the queue is full (" + std::to_string(config_.max_waiting) + " waiting)"};
  const uint64_t id = next_id_++;
  VIGIL_PROBE(request_arrive, id, params.prompt.size(), params.priority, params.max_tokens);
  incoming_.push_back(std::make_unique<Sequence>(id, std::move(params), std::move(sink), vocab_,
                                                 model_.hparams().n_vocab));
  incoming_.back()->adapter = std::move(adapter);
  wake_.notify_all();
  return {SubmitStatus::kAccepted, id, ""};
}

void Engine::cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  cancelled_.push_back(id);
  wake_.notify_all();
}

void Engine::drain() {
  std::lock_guard lock(mu_);
  draining_ = true;
  wake_.notify_all();
}

bool Engine::idle() const {
  std::lock_guard lock(mu_);
  return draining_ && incoming_.empty() && stats_.running == 0 && stats_.waiting == 0;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  EngineStats s = stats_;
  s.allocator = backend_->allocator_stats();  // thread-safe, and only a scrape needs it
  return s;
}

void Engine::loop() {
  for (;;) {
    std::vector<uint64_t> cancelled;
    {
      std::unique_lock lock(mu_);
      const bool was_idle = running_.empty() && waiting_.empty();
      wake_.wait(lock, [&] { return stop_ || !incoming_.empty() || !cancelled_.empty() || !was_idle; });
      if (stop_) break;
      if (was_idle && config_.batch_window_ms > 0 && cancelled_.empty()) {
        // Dynamic batching: from idle, give concurrent arrivals a moment to join the first step.
        wake_.wait_for(lock, std::chrono::duration<double, std::milli>(config_.batch_window_ms),
                       [&] { return stop_; });
      }
      // Counted as waiting at once, not at the end of the step: submit's queue bound reads
      // stats_.waiting + incoming_, and would otherwise miss these for a whole forward pass.
      stats_.waiting += static_cast<int>(incoming_.size());
      while (!incoming_.empty()) {
        waiting_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      cancelled.swap(cancelled_);
    }
    for (uint64_t id : cancelled) {
      for (auto* list : {&waiting_, &running_}) {
        auto it = std::find_if(list->begin(), list->end(), [&](const auto& s) { return s->id == id; });
        if (it == list->end()) continue;
        finish(**it, FinishReason::kCancelled);
        list->erase(it);
      }
    }
    step();
  }
  for (auto* list : {&waiting_, &running_})
    for (auto& seq : *list) finish(*seq, FinishReason::kCancelled);
  waiting_.clear();
  running_.clear();
}

void Engine::sort_by_policy(std::vector<std::unique_ptr<Sequence>>& list) {
  // Keys are taken once, at one instant, so waiting times cannot shift mid-sort.
  const Clock::time_point now = Clock::now();
  for (auto& seq : list) seq->sort_key = seq->key(now);
  std::sort(list.begin(), list.end(), [&](const auto& a, const auto& b) { return policy_->before(a->sort_key, b->sort_key); });
}

void Engine::admit() {
  sort_by_policy(waiting_);
  size_t taken = 0;
  while (taken < waiting_.size() && running_.size() < static_cast<size_t>(config_.max_running)) {
    Sequence& seq = *waiting_[taken];
    // Admit only what fits whole (prompt and everything generated so far) in the free blocks.
    const int need = (static_cast<int>(seq.tokens.size()) + config_.kv_block_size) / config_.kv_block_size;
    if (need > blocks_.free_blocks()) break;
    if (config_.prefix_caching && seq.kv.blocks.empty())
      seq.n_computed = blocks_.match_prefix(seq.kv, seq.tokens, config_.kv_block_size, seq.cache_root());
    running_.push_back(std::move(waiting_[taken]));
    ++taken;
  }
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<long>(taken));
}

void Engine::step() {
  const auto start = Clock::now();
  admit();
  if (running_.empty()) {
    publish_stats(0);
    return;
  }
  // Serve in policy order; preemption takes from the back (the request the policy ranks last).
  sort_by_policy(running_);
  std::vector<Slice> slices;
  uint64_t preempted = 0;
  const StepPlan planned = plan_batch(slices, preempted);
  encode_batch(slices);
  if (!run_forward(slices)) {
    publish_stats(preempted);
    return;
  }
  retire(sample_tokens(slices));
  account_step(planned, std::chrono::duration<double>(Clock::now() - start).count());
  VIGIL_PROBE(scheduler_step, running_.size(), waiting_.size(), batch_.size(), blocks_.free_blocks());
  publish_stats(preempted);
}

bool Engine::decoding(const Sequence& seq) {
  return seq.n_computed == static_cast<int>(seq.tokens.size()) - 1 && seq.n_computed > 0;
}

StepPlan Engine::plan_batch(std::vector<Slice>& slices, uint64_t& preempted) {
  const StepRules rules{config_.max_batched_tokens, config_.max_prefill_chunk, config_.step_latency_target};
  std::vector<const Sequence*> sitting_out;
  std::vector<Sequence*> seqs;
  std::vector<PlanCandidate> queue;
  for (;;) {
    seqs.clear();
    queue.clear();
    for (auto& r : running_)
      if (std::find(sitting_out.begin(), sitting_out.end(), r.get()) == sitting_out.end()) {
        seqs.push_back(r.get());
        queue.push_back({static_cast<int>(r->tokens.size()) - r->n_computed, decoding(*r), r->n_computed});
      }
    StepPlan plan = plan_step(queue, rules, step_cost_);
    bool replan = false;
    for (size_t i = 0; i < seqs.size() && !replan; ++i) {
      if (plan.tokens[i] == 0) continue;
      Sequence& seq = *seqs[i];
      const int positions = seq.n_computed + plan.tokens[i];
      const uint64_t n = make_room(seq, positions);
      preempted += n;
      const bool fits = seq.kv.blocks.size() * static_cast<size_t>(config_.kv_block_size) >= static_cast<size_t>(positions);
      if (!fits) sitting_out.push_back(&seq);  // retried next step
      replan = n > 0 || !fits;  // the preempted (or this one) leave tokens to the others
    }
    if (replan) continue;
    slices.clear();
    for (bool decodes : {true, false})
      for (size_t i = 0; i < seqs.size(); ++i)
        if (plan.tokens[i] > 0 && queue[i].decoding == decodes)
          slices.push_back({seqs[i], seqs[i]->n_computed, seqs[i]->n_computed + plan.tokens[i]});
    return plan;
  }
}

uint64_t Engine::make_room(Sequence& seq, int positions) {
  // Preempt (free and recompute later) lower-ranked sequences until seq's blocks fit: the
  // lowest-ranked one still in prefill and holding blocks (no stream pauses for it), else the
  // lowest-ranked.
  uint64_t preempted = 0;
  while (!blocks_.reserve(seq.kv, positions, config_.kv_block_size)) {
    const auto self = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r.get() == &seq; });
    auto victim = std::prev(running_.end());
    for (auto it = victim; it != self; --it)
      if (!decoding(**it) && !(*it)->kv.blocks.empty()) {
        victim = it;
        break;
      }
    if (victim == self) break;
    Sequence& v = **victim;
    VIGIL_PROBE(request_preempt, v.id, v.tokens.size(), v.kv.blocks.size());
    blocks_.release(v.kv);
    v.n_computed = 0;
    waiting_.push_back(std::move(*victim));
    running_.erase(victim);
    ++preempted;
  }
  return preempted;
}

void Engine::account_step(const StepPlan& step, double seconds) {
  const double predicted = step_cost_.predict(step.shape());
  step_cost_.observe(step.shape(), seconds);
  StepTargetStats& t = step_target_;
  VIGIL_PROBE(step_budget, step.decode_tokens, step.prefill_tokens, step.prefill_budget,
              static_cast<uint64_t>(predicted * 1e9), static_cast<uint64_t>(seconds * 1e9),
              static_cast<uint64_t>(step.target_seconds * 1e9));
  if (step.target_seconds <= 0) return;  // off, or no decodes
  t.target_seconds = step.target_seconds;
  t.decode_step_seconds = step_cost_.decode_seconds(step.decode_tokens, step.decode_kv_rows);
  t.kv_row_seconds = step_cost_.kv_row_seconds();
  t.overrun_seconds = step_cost_.overrun_seconds();
  if (step.prefill_tokens > 0) {
    t.prefill_token_seconds = step_cost_.prefill_token_seconds(step.prefill_tokens);
    t.prefill_kv_row_seconds = step_cost_.prefill_kv_row_seconds(step.prefill_tokens);
  }
  t.attainable = t.decode_step_seconds <= t.target_seconds;
  ++t.steps;
  if (seconds > t.target_seconds) ++t.steps_over;
  const auto& bounds = StepTargetStats::kChunkBounds;
  const auto bucket = std::lower_bound(bounds.begin(), bounds.end(), step.prefill_tokens) - bounds.begin();
  ++t.chunk_counts[static_cast<size_t>(bucket)];
  t.chunk_tokens += static_cast<uint64_t>(step.prefill_tokens);
}

void Engine::encode_batch(const std::vector<Slice>& plan) {
  batch_.clear();
  for (const Slice& s : plan)
    for (int p = s.begin; p < s.end; ++p)
      batch_.push_back({.token = s.seq->tokens[static_cast<size_t>(p)],
                        .pos = p,
                        .seq = &s.seq->kv,
                        .want_logits = p + 1 == static_cast<int>(s.seq->tokens.size()),
                        .adapter = s.seq->adapter.get(),
                        .generated = p >= s.seq->n_prompt});
}

bool Engine::run_forward(const std::vector<Slice>& plan) {
  if (batch_.empty()) return true;
  try {
    backend_->forward(batch_);
  } catch (const std::exception& e) {
    // The whole batch failed: every planned sequence ends with the error, the others run on.
    for (const Slice& s : plan) finish(*s.seq, FinishReason::kError, e.what());
    std::erase_if(running_, [&](const auto& r) {
      return std::any_of(plan.begin(), plan.end(), [&](const Slice& s) { return s.seq == r.get(); });
    });
    return false;
  }
  return true;
}

std::vector<Engine::Sequence*> Engine::sample_tokens(const std::vector<Slice>& plan) {
  // Logits rows come in plan order, one per slice that reached its last known token.
  int logits_row = 0;
  std::vector<Sequence*> done;
  for (const Slice& s : plan) {
    Sequence& seq = *s.seq;
    seq.n_computed = s.end;
    if (config_.prefix_caching)
      blocks_.publish(seq.kv, seq.tokens, seq.n_computed, config_.kv_block_size, seq.cache_root());
    if (s.end != static_cast<int>(seq.tokens.size())) continue;
    const int32_t token = seq.sampler.sample(backend_->logits(logits_row++), seq.tokens);
    const FinishReason reason = append_token(seq, token);
    if (reason != FinishReason::kNone) {
      seq.pending.finish = reason;
      done.push_back(&seq);
    } else {
      stream_pending(seq);
    }
  }
  return done;
}

FinishReason Engine::append_token(Sequence& seq, int32_t token) {
  seq.tokens.push_back(token);
  seq.pending.tokens.push_back(token);
  const FinishReason reason = seq.output.push(token, seq.pending.text);
  if (seq.n_generated() == 1)
    VIGIL_PROBE(request_first_token, seq.id,
                std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - seq.submitted).count());
  return reason;
}

void Engine::stream_pending(Sequence& seq) {
  seq.pending.prompt_tokens = seq.n_prompt;
  seq.pending.completion_tokens = seq.n_generated();
  if (!seq.reported_queue_time) {
    seq.pending.queue_seconds = std::chrono::duration<double>(Clock::now() - seq.submitted).count();
    seq.reported_queue_time = true;
  }
  seq.sink(seq.pending);
  seq.pending = RequestEvent{};
}

void Engine::retire(const std::vector<Sequence*>& done) {
  for (Sequence* seq : done) finish(*seq, seq->pending.finish);
  std::erase_if(running_, [&](const auto& r) { return std::find(done.begin(), done.end(), r.get()) != done.end(); });
}

void Engine::publish_stats(uint64_t preempted) {
  std::lock_guard lock(mu_);
  stats_.running = static_cast<int>(running_.size());
  stats_.waiting = static_cast<int>(waiting_.size());
  stats_.kv_blocks_free = blocks_.free_blocks();
  stats_.prefix_cache_queries = blocks_.prefix_queries();
  stats_.prefix_cache_hits = blocks_.prefix_hits();
  stats_.preemptions += preempted;
  stats_.graphs = backend_->graph_stats();  // graph counters are engine-thread only: copied here
  stats_.step_target = step_target_;
  ++stats_.steps;
}

void Engine::finish(Sequence& seq, FinishReason reason, const std::string& error) {
  blocks_.release(seq.kv);
  {
    // Whoever sees the final event also sees the blocks back in stats().
    std::lock_guard lock(mu_);
    stats_.kv_blocks_free = blocks_.free_blocks();
  }
  RequestEvent& e = seq.pending;
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) e.text += seq.output.flush();
  e.finish = reason;
  e.error = error;
  e.prompt_tokens = seq.n_prompt;
  e.completion_tokens = seq.n_generated();
  VIGIL_PROBE(request_finish, seq.id, static_cast<int>(reason), seq.n_prompt, seq.n_generated());
  if (!seq.reported_queue_time) {
    e.queue_seconds = std::chrono::duration<double>(Clock::now() - seq.submitted).count();
    seq.reported_queue_time = true;
  }
  seq.sink(e);
}

}  // namespace vigil
