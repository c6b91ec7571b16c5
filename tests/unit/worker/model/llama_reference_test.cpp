// The forward pass against llama.cpp on the same GGUF: greedy continuations token for token and
// first-step logits bit for bit (fixtures from scripts/gen_reference.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/llama_context.h"

namespace vigil {
namespace {

// vigil reproduces llama.cpp's CPU arithmetic operation for operation (ggml's matmul kernels, its
// exp polynomial, its summation orders in attention, its fused multiply-adds in RoPE), on every
// kernel path, so logits are bitwise equal and greedy continuations identical. Any difference is a
// regression: one flipped rounding grows through the 30 layers to ~0.5 in the logits
// (docs/performance.md, "Correctness").

nlohmann::json load_fixture() {
  std::ifstream in(VIGIL_SOURCE_DIR "/tests/fixtures/greedy.json");
  if (!in) throw std::runtime_error("tests/fixtures/greedy.json missing");
  return nlohmann::json::parse(in);
}

class LlamaReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LlamaModel::load(VIGIL_MODEL_PATH).release();
    fixture_ = new nlohmann::json(load_fixture());
  }
  static void TearDownTestSuite() {
    delete model_;
    delete fixture_;
  }

  // Greedy continuation of `prompt` for n tokens, and the logits of the first generated position.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n, std::vector<float>* first_logits) {
    const int n_ctx = static_cast<int>(prompt.size()) + n;
    KvCache cache(model_->hparams(), (n_ctx + 15) / 16, 16);
    KvBlockAllocator blocks(cache.n_blocks());
    ThreadPool pool(2);
    LlamaContext ctx(*model_, cache, pool, static_cast<int>(prompt.size()), n_ctx);
    KvSequence seq;
    EXPECT_TRUE(blocks.reserve(seq, n_ctx, 16));
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i)
      batch.push_back({prompt[i], static_cast<int32_t>(i), &seq, i + 1 == prompt.size()});
    ctx.forward(batch);
    std::vector<int32_t> out;
    for (int step = 0; step < n; ++step) {
      auto logits = ctx.logits(0);
      if (step == 0 && first_logits) first_logits->assign(logits.begin(), logits.end());
      out.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      BatchToken next{out.back(), static_cast<int32_t>(prompt.size()) + step, &seq, true};
      next.generated = true;
      ctx.forward({&next, 1});
    }
    return out;
  }

  static LlamaModel* model_;
  static nlohmann::json* fixture_;
};

LlamaModel* LlamaReference::model_ = nullptr;
nlohmann::json* LlamaReference::fixture_ = nullptr;

TEST_F(LlamaReference, GreedyContinuationsMatchLlamaCppTokenForToken) {
  const auto& cases = (*fixture_)["cases"];
  ASSERT_GE(cases.size(), 20u);
  int exact = 0;
  for (const auto& c : cases) {
    auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    auto want = c["generated_ids"].get<std::vector<int32_t>>();
    std::vector<float> logits;
    auto margins = c["generated_margins"].get<std::vector<float>>();
    auto got = greedy(prompt, static_cast<int>(want.size()), &logits);
    exact += got == want;
    const size_t split = static_cast<size_t>(std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin());
    EXPECT_EQ(split, want.size()) << "continuation parts from llama.cpp at step " << split
                                  << " (llama.cpp's top-1/top-2 margin there "
                                  << (split < want.size() ? margins[split] : 0.0f) << "): " << c["text"];

    int differing = 0;
    float worst = 0.0f;
    for (const auto& pair : c["first_top_logits"]) {
      const float got_logit = logits[static_cast<size_t>(pair[0].get<int>())];
      differing += got_logit != pair[1].get<float>();
      worst = std::max(worst, std::abs(got_logit - pair[1].get<float>()));
    }
    EXPECT_EQ(differing, 0) << differing << " of the top-32 first-step logits differ (max |diff| " << worst
                            << ") for " << c["text"];
  }
  std::printf("greedy: %d of %zu continuations identical to llama.cpp over 64 tokens\n", exact, cases.size());
}

TEST_F(LlamaReference, FullLogitsBitExact) {
  int files = 0;
  for (const auto& c : (*fixture_)["cases"]) {
    if (!c.contains("full_logits_file") || c["full_logits_file"].is_null()) continue;
    ++files;
    std::ifstream in(std::string(VIGIL_SOURCE_DIR "/tests/fixtures/") + c["full_logits_file"].get<std::string>(),
                     std::ios::binary);
    ASSERT_TRUE(in) << c["full_logits_file"];
    std::vector<float> want(static_cast<size_t>(model_->hparams().n_vocab));
    in.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(float)));
    ASSERT_TRUE(in);
    std::vector<float> got;
    greedy(c["prompt_ids"].get<std::vector<int32_t>>(), 1, &got);
    size_t differing = 0;
    float worst = 0.0f;
    for (size_t i = 0; i < want.size(); ++i) {
      differing += got[i] != want[i];
      worst = std::max(worst, std::abs(got[i] - want[i]));
    }
    std::printf("full logits (%s): %zu of %zu differ, max |diff| %.5f\n",
                c["full_logits_file"].get<std::string>().c_str(), differing, want.size(), static_cast<double>(worst));
    EXPECT_EQ(differing, 0u) << c["full_logits_file"];
  }
  EXPECT_GE(files, 2);
}

}  // namespace
}  // namespace vigil
