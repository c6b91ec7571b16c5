// The serving engine on the real model: batching and preemption never change greedy results,
// cancellation and completion give every KV block back, limits are enforced at submit.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>

#include "backend/select/backend_select.h"
#include "model/chat_template.h"

namespace vigil {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  int events = 0;
};

// Collects one request's events and lets the test wait for its end.
class Collector {
 public:
  EventSink sink() {
    return [this](const RequestEvent& e) {
      std::lock_guard lock(mu_);
      out_.tokens.insert(out_.tokens.end(), e.tokens.begin(), e.tokens.end());
      out_.text += e.text;
      ++out_.events;
      if (e.finish != FinishReason::kNone) {
        out_.finish = e.finish;
        done_.notify_all();
      }
    };
  }
  Outcome wait() {
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return out_.finish != FinishReason::kNone; });
    return out_;
  }
  int events() {
    std::lock_guard lock(mu_);
    return out_.events;
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  Outcome out_;
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LlamaModel::load(VIGIL_MODEL_PATH).release();
    vocab_ = new Vocab(Vocab::from_gguf(model_->file()));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete model_;
  }

  // The CPU backend, as backend/select builds it for every verb.
  static std::unique_ptr<ForwardBackend> cpu_backend(const EngineConfig& config) {
    return make_backend(BackendConfig{}, *model_, backend_shape(config));
  }

  static RequestParams request(const std::string& user, int max_tokens) {
    RequestParams p;
    p.prompt = vocab_->encode(apply_chat_template(std::vector<ChatMessage>{{"user", user}}, true), true);
    p.max_tokens = max_tokens;
    p.ignore_eos = true;  // fixed lengths make the comparison cover every position
    return p;
  }

  static std::vector<Outcome> run(Engine& engine, const std::vector<RequestParams>& requests) {
    std::vector<std::unique_ptr<Collector>> collectors;
    for (const auto& r : requests) {
      collectors.push_back(std::make_unique<Collector>());
      SubmitResult s = engine.submit(r, collectors.back()->sink());
      EXPECT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
    }
    std::vector<Outcome> out;
    for (auto& c : collectors) out.push_back(c->wait());
    return out;
  }

  // Each request run alone, one at a time: what every batched run must equal.
  static std::vector<Outcome> each_alone(const std::vector<RequestParams>& requests) {
    EngineConfig cfg;
    cfg.max_running = 1;
    Engine alone(*model_, *vocab_, cfg, cpu_backend(cfg));
    std::vector<Outcome> out;
    for (const auto& r : requests) out.push_back(run(alone, {r})[0]);
    return out;
  }

  // Six requests of 40 tokens need ~5 blocks of 16 each; 12 blocks cannot hold them at once.
  static void preempts_under_a_tiny_cache_without_changing_results(StepLatencyTarget step_target) {
    std::vector<RequestParams> requests;
    for (size_t i = 0; i < 6; ++i) requests.push_back(request(kQuestions[i], 40));
    const std::vector<Outcome> expected = each_alone(requests);
    EngineConfig tiny;
    tiny.kv_blocks = 12;
    tiny.max_running = 6;
    // The first step must see all six: with a latency target, a request that arrives while the
    // first one already decodes gets prompt chunks as small as the learned costs allow, and a slow
    // enough machine then runs the six nearly one after another, never filling the cache (seen
    // under ctest -j2: preemptions 0). Six in-process submits take microseconds.
    tiny.batch_window_ms = 500;
    tiny.step_latency_target = step_target;
    Engine engine(*model_, *vocab_, tiny, cpu_backend(tiny));
    auto got = run(engine, requests);
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i].tokens, expected[i].tokens) << i;
    EXPECT_GT(engine.stats().preemptions, 0u);
    EXPECT_EQ(engine.stats().kv_blocks_free, tiny.kv_blocks);
  }

  static const std::vector<std::string> kQuestions;
  static LlamaModel* model_;
  static Vocab* vocab_;
};

LlamaModel* EngineTest::model_ = nullptr;
Vocab* EngineTest::vocab_ = nullptr;

const std::vector<std::string> EngineTest::kQuestions = {
    "What is the capital of France?", "Write a haiku about the sea.", "Explain TCP in one sentence.",
    "List three prime numbers.",      "Who wrote Hamlet?",             "What is 12 times 12?",
    "Name a color of the rainbow.",   "Say hello in Spanish."};

TEST_F(EngineTest, ConcurrentGreedyEqualsAlone) {
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < kQuestions.size(); ++i) requests.push_back(request(kQuestions[i], 12 + static_cast<int>(i) * 3));

  const std::vector<Outcome> expected = each_alone(requests);

  EngineConfig batched_cfg;
  batched_cfg.max_running = 8;
  batched_cfg.max_batched_tokens = 64;  // forces chunked prefill next to running decodes
  Engine batched(*model_, *vocab_, batched_cfg, cpu_backend(batched_cfg));
  auto got = run(batched, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << kQuestions[i];
    EXPECT_EQ(got[i].text, expected[i].text);
    EXPECT_EQ(got[i].finish, FinishReason::kLength);
    EXPECT_EQ(got[i].tokens.size(), requests[i].max_tokens + 0u);
  }
  EXPECT_EQ(batched.stats().kv_blocks_free, batched_cfg.kv_blocks);
}

TEST_F(EngineTest, PreemptionUnderATinyCacheCompletesEveryRequestCorrectly) {
  preempts_under_a_tiny_cache_without_changing_results({});
}

TEST_F(EngineTest, PreemptionWithTheAutoTargetCompletesEveryRequestCorrectly) {
  preempts_under_a_tiny_cache_without_changing_results(StepLatencyTarget::automatic());
}

TEST_F(EngineTest, ALatencyTargetChunksPromptsBesideDecodesWithoutChangingResults) {
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < kQuestions.size(); ++i) requests.push_back(request(kQuestions[i], 12 + static_cast<int>(i) * 3));
  const std::vector<Outcome> expected = each_alone(requests);

  // 1 ms is below any decode step of this model (it reads ~100 MB of weights a step): every step
  // that holds decodes takes the floor of one prompt token, so prompts advance a token at a time
  // from whatever position a partly written KV block left them at.
  EngineConfig cfg;
  cfg.max_running = 8;
  cfg.step_latency_target = StepLatencyTarget::duration(std::chrono::milliseconds(1));
  Engine engine(*model_, *vocab_, cfg, cpu_backend(cfg));
  const StepTargetStats calibrated = engine.stats().step_target;
  EXPECT_DOUBLE_EQ(calibrated.target_seconds, 0.001);
  EXPECT_GT(calibrated.decode_step_seconds, 0.0);
  EXPECT_GT(calibrated.prefill_token_seconds, 0.0);
  EXPECT_FALSE(calibrated.attainable);
  auto got = run(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i].tokens, expected[i].tokens) << kQuestions[i];
  const StepTargetStats t = engine.stats().step_target;
  EXPECT_GT(t.steps, 0u);
  uint64_t above_a_token = 0, chunked = 0;
  for (size_t b = 0; b < t.chunk_counts.size(); ++b) {
    if (b >= 1) chunked += t.chunk_counts[b];  // bucket 0 holds steps of decodes alone
    if (b >= 2) above_a_token += t.chunk_counts[b];  // bounds 0, 1, then above 1
  }
  EXPECT_GT(chunked, 0u) << "no prompt was chunked beside decodes";
  EXPECT_EQ(above_a_token, 0u) << "a step with decodes took more than one prompt token";
  EXPECT_EQ(engine.stats().kv_blocks_free, cfg.kv_blocks);
}

TEST_F(EngineTest, PreemptionWithALatencyTargetCompletesEveryRequestCorrectly) {
  preempts_under_a_tiny_cache_without_changing_results(StepLatencyTarget::duration(std::chrono::milliseconds(20)));
}

TEST_F(EngineTest, PreemptionWithATargetOfTwiceTheDecodeStepCompletesEveryRequestCorrectly) {
  preempts_under_a_tiny_cache_without_changing_results(StepLatencyTarget::multiple(2.0));
}

// Every prompt in chunks of 1, 3 and 7 tokens (so most chunks start inside a partly written KV
// block of 16) beside the other requests' decodes: the same tokens as each request alone and
// unchunked (the backend's logits are compared bit for bit in cpu_chunked_prefill_test).
TEST_F(EngineTest, PromptsChunkedAt1_3And7TokensEqualTheUnchunkedRun) {
  std::vector<RequestParams> requests;
  size_t longest = 0;
  for (size_t i = 0; i < kQuestions.size(); ++i) {
    requests.push_back(request(kQuestions[i], 8 + static_cast<int>(i) * 2));
    longest = std::max(longest, requests.back().prompt.size());
  }
  const std::vector<Outcome> expected = each_alone(requests);
  for (int chunk : {1, 3, 7}) {
    EngineConfig cfg;
    cfg.max_running = 8;
    cfg.max_prefill_chunk = chunk;
    Engine engine(*model_, *vocab_, cfg, cpu_backend(cfg));
    auto got = run(engine, requests);
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(got[i].tokens, expected[i].tokens) << "chunks of " << chunk << ": " << kQuestions[i];
    // The longest prompt alone needs this many steps in chunks of `chunk`.
    EXPECT_GE(engine.stats().steps, (longest + static_cast<size_t>(chunk) - 1) / static_cast<size_t>(chunk));
    EXPECT_EQ(engine.stats().kv_blocks_free, cfg.kv_blocks);
  }
}

// "auto" (five decode steps of the batch, at most 100 ms) is attainable by construction and sizes
// prompt chunks to the token: results unchanged.
TEST_F(EngineTest, TheAutoTargetKeepsResultsAndCalibratesSmallChunks) {
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < kQuestions.size(); ++i) requests.push_back(request(kQuestions[i], 12 + static_cast<int>(i) * 3));
  const std::vector<Outcome> expected = each_alone(requests);
  EngineConfig cfg;
  cfg.max_running = 8;
  cfg.step_latency_target = StepLatencyTarget::automatic();
  Engine engine(*model_, *vocab_, cfg, cpu_backend(cfg));
  const StepTargetStats calibrated = engine.stats().step_target;
  EXPECT_DOUBLE_EQ(calibrated.decode_multiple, 5.0);
  EXPECT_DOUBLE_EQ(calibrated.target_seconds, std::min(0.1, 5.0 * calibrated.decode_step_seconds));
  EXPECT_GT(calibrated.prefill_token_seconds, 0.0);  // chunks beside a decode, timed at start
  EXPECT_TRUE(calibrated.attainable);
  auto got = run(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i].tokens, expected[i].tokens) << kQuestions[i];
  const StepTargetStats t = engine.stats().step_target;
  EXPECT_GT(t.steps, 0u);
  EXPECT_TRUE(t.attainable);
  EXPECT_EQ(engine.stats().kv_blocks_free, cfg.kv_blocks);
}

TEST_F(EngineTest, CancelFreesBlocksAndEndsTheRequest) {
  EngineConfig cfg;
  Engine engine(*model_, *vocab_, cfg, cpu_backend(cfg));
  Collector c;
  SubmitResult s = engine.submit(request("Tell me a long story.", 1000), c.sink());
  ASSERT_EQ(s.status, SubmitStatus::kAccepted);
  while (c.events() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine.cancel(s.id);
  Outcome o = c.wait();
  EXPECT_EQ(o.finish, FinishReason::kCancelled);
  EXPECT_LT(o.tokens.size(), 1000u);
  for (int i = 0; i < 100 && engine.stats().kv_blocks_free != cfg.kv_blocks; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(engine.stats().kv_blocks_free, cfg.kv_blocks);
}

TEST_F(EngineTest, PrefixCacheReusesBlocksWithoutChangingResults) {
  EngineConfig no_cache;
  no_cache.prefix_caching = false;
  Engine plain(*model_, *vocab_, no_cache, cpu_backend(no_cache));
  const RequestParams r = request("Describe the water cycle in two sentences.", 24);
  const Outcome want = run(plain, {r})[0];
  EXPECT_EQ(plain.stats().prefix_cache_hits, 0u);

  EngineConfig cfg;
  Engine engine(*model_, *vocab_, cfg, cpu_backend(cfg));
  const Outcome first = run(engine, {r})[0];
  const uint64_t hits_after_first = engine.stats().prefix_cache_hits;
  const Outcome second = run(engine, {r})[0];  // same prompt: every full block is cached
  EXPECT_EQ(first.tokens, want.tokens);
  EXPECT_EQ(second.tokens, want.tokens);
  const size_t full_blocks_tokens = (r.prompt.size() - 1) / cfg.kv_block_size * cfg.kv_block_size;
  EXPECT_EQ(engine.stats().prefix_cache_hits - hits_after_first, full_blocks_tokens);
  EXPECT_EQ(engine.stats().kv_blocks_free, cfg.kv_blocks);  // cached blocks still count as available
}

TEST_F(EngineTest, SubmitRejectsWhatCanNeverRun) {
  EngineConfig cfg;
  cfg.max_context = 64;
  cfg.max_waiting = 1;
  Engine engine(*model_, *vocab_, cfg, cpu_backend(cfg));
  Collector c;
  EXPECT_EQ(engine.submit(request("hi", 100), c.sink()).status, SubmitStatus::kTooLong);
  RequestParams empty;
  EXPECT_EQ(engine.submit(empty, c.sink()).status, SubmitStatus::kInvalid);
  RequestParams bad = request("hi", 4);
  bad.prompt.push_back(999999);
  EXPECT_EQ(engine.submit(bad, c.sink()).status, SubmitStatus::kInvalid);
  RequestParams adapter = request("hi", 4);
  adapter.adapter = "nope";
  EXPECT_EQ(engine.submit(adapter, c.sink()).status, SubmitStatus::kUnknownAdapter);
  engine.drain();
  EXPECT_EQ(engine.submit(request("hi", 4), c.sink()).status, SubmitStatus::kDraining);
}

// The engine runs the backend it is handed, built by backend/select for the engine's limits.
TEST_F(EngineTest, RunsTheBackendItIsHandedSizedFromItsLimits) {
  EngineConfig cfg;
  cfg.max_running = 4;
  cfg.max_batched_tokens = 32;
  cfg.kv_blocks = 64;
  cfg.max_context = 512;
  const BackendShape shape = backend_shape(cfg);
  EXPECT_EQ(shape.max_batch, 32);
  EXPECT_EQ(shape.decode_rows, 4);
  EXPECT_EQ(shape.kv_blocks, 64);
  EXPECT_EQ(shape.kv_block_size, cfg.kv_block_size);
  EXPECT_EQ(shape.max_positions, 512);
  EXPECT_EQ(shape.threads, cfg.threads);
  Engine engine(*model_, *vocab_, cfg, make_backend(BackendConfig{}, *model_, shape));
  EXPECT_EQ(engine.backend_description().rfind("cpu ", 0), 0u) << engine.backend_description();
  Outcome out = run(engine, {request("Say hello in Spanish.", 6)})[0];
  EXPECT_EQ(out.tokens.size(), 6u);
  const EngineStats stats = engine.stats();
  EXPECT_GT(stats.allocator.reserved_bytes, 0u) << "the KV cache lives in the backend's allocator";
  EXPECT_FALSE(stats.graphs.has_value()) << "the CPU backend has no decode graphs";
}

// Asking for CUDA where there is none fails at start with the reason, never later per request.
TEST_F(EngineTest, CudaBackendWithoutAGpuFailsNamingTheProblem) {
  if (std::filesystem::exists("/dev/nvidia0")) GTEST_SKIP() << "this host has a GPU: the CUDA backend would start";
  EngineConfig cfg;
  BackendConfig backend;
  backend.kind = BackendKind::kCuda;
  try {
    make_backend(backend, *model_, backend_shape(cfg));
    FAIL() << "the CUDA backend started on a host without a GPU";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (cuda_backend_built())
      EXPECT_NE(what.find(": cudaGetDeviceCount: "), std::string::npos) << what;
    else
      EXPECT_NE(what.find("built without the CUDA backend"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace vigil
