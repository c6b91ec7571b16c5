// LoRA in the forward pass and the engine on the real model: a B = 0 adapter leaves logits
// bit-identical, adapters batched together give what each gives alone, and unloading an adapter
// never disturbs the requests still using it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "backend/cpu/cpu_forward.h"
#include "backend/cpu/kv_cache.h"
#include "backend/select/backend_select.h"
#include "engine/adapter_registry.h"
#include "engine/engine.h"
#include "worker/lora_builder.h"

namespace vigil {
namespace {

namespace fs = std::filesystem;

// Collects one request's tokens and lets the test wait for its end.
class Collector {
 public:
  EventSink sink() {
    return [this](const RequestEvent& e) {
      std::lock_guard lock(mu_);
      tokens_.insert(tokens_.end(), e.tokens.begin(), e.tokens.end());
      if (e.finish != FinishReason::kNone) {
        finish_ = e.finish;
        done_.notify_all();
      }
    };
  }
  std::vector<int32_t> wait(FinishReason* finish = nullptr) {
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return finish_ != FinishReason::kNone; });
    if (finish) *finish = finish_;
    return tokens_;
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  std::vector<int32_t> tokens_;
  FinishReason finish_ = FinishReason::kNone;
};

class LoraEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LlamaModel::load(VIGIL_MODEL_PATH).release();
    vocab_ = new Vocab(Vocab::from_gguf(model_->file()));
    dir_ = new fs::path(fs::path(testing::TempDir()) / ("lora_engine_" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    test::LoraSpec x;  // every matrix of every layer, F32 rank 8
    x.pairs = test::lora_all_matrices(*model_, 8, 0, false);
    x.b_range = 0.5f;  // strong enough to change greedy continuations
    test::write_file((*dir_ / "x.gguf").string(), test::build_lora(x, *model_));
    test::LoraSpec y;  // a few matrices, F16 rank 16, other weights
    y.seed = 2;
    y.b_range = 0.5f;
    y.alpha = 32.0f;
    for (int l : {0, 7, 15, 29})
      for (const char* m : {"attn_q", "attn_v", "ffn_down"}) y.pairs.push_back({l, m, 16, 1});
    test::write_file((*dir_ / "y.gguf").string(), test::build_lora(y, *model_));
    test::LoraSpec zero;
    zero.pairs = test::lora_all_matrices(*model_, 8, 0, true);
    test::write_file((*dir_ / "zero.gguf").string(), test::build_lora(zero, *model_));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete vocab_;
    delete model_;
  }

  static std::vector<int32_t> prompt(int i) {
    static const char* kPrompts[] = {"The capital of France is", "def fibonacci(n):", "Once upon a time, in a"};
    return vocab_->encode(kPrompts[i], false);
  }

  // Logits after a prefill of `tokens` on a fresh sequence, with `adapter` on every token.
  static std::vector<float> prefill_logits(const std::vector<int32_t>& tokens, const LoraAdapter* adapter) {
    KvCache cache(model_->hparams(), 8, 16);
    KvBlockAllocator blocks(cache.n_blocks());
    ThreadPool pool(2);
    CpuForward cpu(*model_, cache, pool, 32, 128);
    KvSequence seq;
    EXPECT_TRUE(blocks.reserve(seq, static_cast<int>(tokens.size()), 16));
    std::vector<BatchToken> batch;
    for (size_t p = 0; p < tokens.size(); ++p)
      batch.push_back({.token = tokens[p], .pos = static_cast<int32_t>(p), .seq = &seq, .want_logits = p + 1 == tokens.size(), .adapter = adapter});
    cpu.forward(batch);
    auto l = cpu.logits(0);
    return {l.begin(), l.end()};
  }

  static RequestParams greedy(const std::vector<int32_t>& p, const std::string& adapter, int max_tokens = 12) {
    RequestParams r;
    r.prompt = p;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.adapter = adapter;
    return r;
  }

  static EngineConfig config() {
    EngineConfig c;
    c.threads = 2;
    c.kv_blocks = 64;
    c.max_context = 256;
    return c;
  }

  // The CPU backend, as backend/select builds it for every verb.
  static std::unique_ptr<ForwardBackend> cpu_backend() {
    return make_backend(BackendConfig{}, *model_, backend_shape(config()));
  }

  static LlamaModel* model_;
  static Vocab* vocab_;
  static fs::path* dir_;
};
LlamaModel* LoraEngineTest::model_ = nullptr;
Vocab* LoraEngineTest::vocab_ = nullptr;
fs::path* LoraEngineTest::dir_ = nullptr;

TEST_F(LoraEngineTest, ZeroBAdapterGivesBitIdenticalLogits) {
  auto zero = LoraAdapter::load((*dir_ / "zero.gguf").string(), *model_);
  auto x = LoraAdapter::load((*dir_ / "x.gguf").string(), *model_);
  const auto p = prompt(0);
  const auto base = prefill_logits(p, nullptr);
  const auto with_zero = prefill_logits(p, zero.get());
  ASSERT_EQ(base.size(), with_zero.size());
  EXPECT_EQ(std::memcmp(base.data(), with_zero.data(), base.size() * sizeof(float)), 0);
  const auto with_x = prefill_logits(p, x.get());
  EXPECT_NE(std::memcmp(base.data(), with_x.data(), base.size() * sizeof(float)), 0) << "a real adapter changes logits";
}

TEST_F(LoraEngineTest, MixedBatchRowsEqualEachAdapterAlone) {
  auto x = LoraAdapter::load((*dir_ / "x.gguf").string(), *model_);
  auto y = LoraAdapter::load((*dir_ / "y.gguf").string(), *model_);
  const std::vector<std::pair<std::vector<int32_t>, const LoraAdapter*>> seqs = {
      {prompt(0), nullptr}, {prompt(1), x.get()}, {prompt(2), y.get()}, {prompt(0), x.get()}};
  KvCache cache(model_->hparams(), 16, 16);
  KvBlockAllocator blocks(cache.n_blocks());
  ThreadPool pool(2);
  CpuForward cpu(*model_, cache, pool, 64, 128);
  std::vector<KvSequence> kv(seqs.size());
  std::vector<BatchToken> batch;
  // Tokens of the sequences interleaved, so each adapter's rows are scattered through the batch.
  size_t longest = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    ASSERT_TRUE(blocks.reserve(kv[s], static_cast<int>(seqs[s].first.size()), 16));
    longest = std::max(longest, seqs[s].first.size());
  }
  std::vector<int> row_of(seqs.size());
  for (size_t p = 0; p < longest; ++p)
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (p >= seqs[s].first.size()) continue;
      const bool last = p + 1 == seqs[s].first.size();
      batch.push_back({.token = seqs[s].first[p], .pos = static_cast<int32_t>(p), .seq = &kv[s], .want_logits = last, .adapter = seqs[s].second});
    }
  cpu.forward(batch);
  int row = 0;
  for (const BatchToken& t : batch)
    if (t.want_logits) row_of[static_cast<size_t>(t.seq - kv.data())] = row++;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto alone = prefill_logits(seqs[s].first, seqs[s].second);
    auto mixed = cpu.logits(row_of[s]);
    EXPECT_EQ(std::memcmp(alone.data(), mixed.data(), alone.size() * sizeof(float)), 0) << "sequence " << s;
  }
}

TEST_F(LoraEngineTest, ConcurrentRequestsOnDifferentAdaptersMatchEachAlone) {
  AdapterRegistry reg(*model_, dir_->string());
  ASSERT_EQ(reg.load("x", "x.gguf").status, AdapterStatus::kOk);
  ASSERT_EQ(reg.load("y", "y.gguf").status, AdapterStatus::kOk);
  const std::vector<std::pair<int, std::string>> requests = {{0, ""}, {1, "x"}, {2, "y"}, {0, "x"}, {1, "y"}, {2, ""}};
  std::vector<std::vector<int32_t>> alone;
  {
    Engine engine(*model_, *vocab_, config(), cpu_backend(), &reg);
    for (const auto& [p, adapter] : requests) {
      Collector c;
      ASSERT_EQ(engine.submit(greedy(prompt(p), adapter), c.sink()).status, SubmitStatus::kAccepted);
      alone.push_back(c.wait());
    }
  }
  EXPECT_NE(alone[0], alone[3]) << "adapter x must change the greedy continuation of prompt 0";
  EXPECT_NE(alone[1], alone[4]) << "x and y must differ on prompt 1";

  Engine engine(*model_, *vocab_, config(), cpu_backend(), &reg);
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const auto& [p, adapter] : requests) {
    collectors.push_back(std::make_unique<Collector>());
    ASSERT_EQ(engine.submit(greedy(prompt(p), adapter), collectors.back()->sink()).status, SubmitStatus::kAccepted);
  }
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(collectors[i]->wait(), alone[i]) << "request " << i;
}

TEST_F(LoraEngineTest, UnloadWhileRunningLetsTheRequestFinish) {
  AdapterRegistry reg(*model_, dir_->string());
  ASSERT_EQ(reg.load("x", "x.gguf").status, AdapterStatus::kOk);
  Engine engine(*model_, *vocab_, config(), cpu_backend(), &reg);
  Collector first;
  ASSERT_EQ(engine.submit(greedy(prompt(1), "x", 24), first.sink()).status, SubmitStatus::kAccepted);
  const auto expected = first.wait();

  Collector c;
  ASSERT_EQ(engine.submit(greedy(prompt(1), "x", 24), c.sink()).status, SubmitStatus::kAccepted);
  ASSERT_EQ(reg.unload("x").status, AdapterStatus::kOk);
  FinishReason finish = FinishReason::kNone;
  EXPECT_EQ(c.wait(&finish), expected);
  EXPECT_EQ(finish, FinishReason::kLength);

  Collector late;
  const SubmitResult r = engine.submit(greedy(prompt(1), "x"), late.sink());
  EXPECT_EQ(r.status, SubmitStatus::kUnknownAdapter);
  EXPECT_EQ(r.message, "adapter 'x' is not loaded");
}

// K/V computed with an adapter differ from the base model's: prefix caching must never hand the
// blocks of one to the other, while still sharing them between requests of the same adapter.
TEST_F(LoraEngineTest, PrefixCacheSharesBlocksOnlyWithinOneAdapter) {
  AdapterRegistry reg(*model_, dir_->string());
  ASSERT_EQ(reg.load("x", "x.gguf").status, AdapterStatus::kOk);
  std::vector<int32_t> long_prompt;  // three full blocks and some
  for (int i = 0; i < 4; ++i)
    for (int p = 0; p < 3; ++p) {
      const auto part = prompt(p);
      long_prompt.insert(long_prompt.end(), part.begin(), part.end());
    }
  ASSERT_GT(long_prompt.size(), 48u);
  std::vector<int32_t> x_fresh;
  {
    Engine engine(*model_, *vocab_, config(), cpu_backend(), &reg);
    Collector c;
    ASSERT_EQ(engine.submit(greedy(long_prompt, "x"), c.sink()).status, SubmitStatus::kAccepted);
    x_fresh = c.wait();
  }
  Engine engine(*model_, *vocab_, config(), cpu_backend(), &reg);
  ASSERT_TRUE(engine.config().prefix_caching);
  auto run = [&](const std::string& adapter) {
    Collector c;
    EXPECT_EQ(engine.submit(greedy(long_prompt, adapter), c.sink()).status, SubmitStatus::kAccepted);
    return c.wait();
  };
  run("");  // the base model caches its blocks of the prompt
  const uint64_t hits_after_base = engine.stats().prefix_cache_hits;
  EXPECT_EQ(run("x"), x_fresh) << "x must not reuse the base model's cached K/V";
  EXPECT_EQ(engine.stats().prefix_cache_hits, hits_after_base);
  EXPECT_EQ(run("x"), x_fresh);
  EXPECT_GT(engine.stats().prefix_cache_hits, hits_after_base) << "a second request on x reuses x's blocks";
}

// Adapters held in the engine's caching allocator (EngineService sets it so): a load is one block
// more, an unload one less; an adapter still held when its engine is gone keeps the allocator alive.
TEST_F(LoraEngineTest, AdaptersLiveInTheEnginesAllocator) {
  AdapterRegistry reg(*model_, dir_->string());
  std::shared_ptr<const LoraAdapter> held;
  {
    Engine engine(*model_, *vocab_, config(), cpu_backend(), &reg);
    reg.hold_in(engine.adapter_memory());
    const AllocatorStats before = engine.stats().allocator;
    ASSERT_EQ(reg.load("y", "y.gguf").status, AdapterStatus::kOk);
    const AllocatorStats loaded = engine.stats().allocator;
    EXPECT_EQ(loaded.blocks, before.blocks + 1);
    EXPECT_GE(loaded.allocated_bytes - before.allocated_bytes, reg.find("y")->bytes());
    ASSERT_EQ(reg.unload("y").status, AdapterStatus::kOk);
    EXPECT_EQ(engine.stats().allocator.blocks, before.blocks);
    EXPECT_EQ(engine.stats().allocator.allocated_bytes, before.allocated_bytes);
    ASSERT_EQ(reg.load("x", "x.gguf").status, AdapterStatus::kOk);
    held = reg.find("x");
  }
  ASSERT_EQ(reg.unload("x").status, AdapterStatus::kOk);
  const LoraPair* pair = held->pair(0, LayerMatrix::kQ);
  ASSERT_NE(pair, nullptr);
  float first = 0;
  std::memcpy(&first, pair->a.data, sizeof first);  // F32, still readable (ASan: no use after free)
  EXPECT_TRUE(std::isfinite(first));
  held.reset();
}

TEST_F(LoraEngineTest, AnEngineWithoutRegistryRefusesAdapters) {
  Engine engine(*model_, *vocab_, config(), cpu_backend());
  Collector c;
  EXPECT_EQ(engine.submit(greedy(prompt(0), "x"), c.sink()).status, SubmitStatus::kUnknownAdapter);
}

}  // namespace
}  // namespace vigil
