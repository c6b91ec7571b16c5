// The forward pass with a LoRA adapter against llama.cpp with the same adapter file: greedy
// continuations token for token and first-step logits bit for bit (fixtures from
// scripts/gen_lora_reference.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "model/llama_context.h"

namespace vigil {
namespace {

// As llama_reference_test: the base model is bitwise llama.cpp's, and the adapter's products are
// F32/F16 matmuls like ggml's, so nothing may differ.

class LoraReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LlamaModel::load(VIGIL_MODEL_PATH).release();
    std::ifstream in(VIGIL_SOURCE_DIR "/tests/fixtures/lora_greedy.json");
    if (!in) throw std::runtime_error("tests/fixtures/lora_greedy.json missing");
    fixture_ = new nlohmann::json(nlohmann::json::parse(in));
    adapter_ = new std::shared_ptr<const LoraAdapter>(LoraAdapter::load(
        std::string(VIGIL_SOURCE_DIR "/tests/fixtures/") + (*fixture_)["adapter"].get<std::string>(), *model_));
  }
  static void TearDownTestSuite() {
    delete adapter_;
    delete fixture_;
    delete model_;
  }

  // Greedy continuation of `prompt` for n tokens with `adapter`, and the first step's logits.
  static std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n, const LoraAdapter* adapter,
                                     std::vector<float>* first_logits) {
    const int n_ctx = static_cast<int>(prompt.size()) + n;
    KvCache cache(model_->hparams(), (n_ctx + 15) / 16, 16);
    KvBlockAllocator blocks(cache.n_blocks());
    ThreadPool pool(2);
    LlamaContext ctx(*model_, cache, pool, static_cast<int>(prompt.size()), n_ctx);
    KvSequence seq;
    EXPECT_TRUE(blocks.reserve(seq, n_ctx, 16));
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i)
      batch.push_back({prompt[i], static_cast<int32_t>(i), &seq, i + 1 == prompt.size(), adapter});
    ctx.forward(batch);
    std::vector<int32_t> out;
    for (int step = 0; step < n; ++step) {
      auto logits = ctx.logits(0);
      if (step == 0 && first_logits) first_logits->assign(logits.begin(), logits.end());
      out.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      BatchToken next{out.back(), static_cast<int32_t>(prompt.size()) + step, &seq, true, adapter};
      next.generated = true;
      ctx.forward({&next, 1});
    }
    return out;
  }

  static LlamaModel* model_;
  static nlohmann::json* fixture_;
  static std::shared_ptr<const LoraAdapter>* adapter_;
};

LlamaModel* LoraReference::model_ = nullptr;
nlohmann::json* LoraReference::fixture_ = nullptr;
std::shared_ptr<const LoraAdapter>* LoraReference::adapter_ = nullptr;

TEST_F(LoraReference, GreedyWithAdapterMatchesLlamaCpp) {
  const auto& cases = (*fixture_)["cases"];
  ASSERT_GE(cases.size(), 5u);
  int exact = 0, changed = 0;
  float worst_all = 0.0f;
  for (const auto& c : cases) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["generated_ids"].get<std::vector<int32_t>>();
    const auto margins = c["generated_margins"].get<std::vector<float>>();
    std::vector<float> logits;
    const auto got = greedy(prompt, static_cast<int>(want.size()), adapter_->get(), &logits);
    exact += got == want;
    changed += got != greedy(prompt, static_cast<int>(want.size()), nullptr, nullptr);
    const size_t split = static_cast<size_t>(std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin());
    EXPECT_EQ(split, want.size()) << "continuation parts from llama.cpp at step " << split
                                  << " (llama.cpp's top-1/top-2 margin there "
                                  << (split < want.size() ? margins[split] : 0.0f) << "): " << c["text"];
    int differing = 0;
    float worst = 0.0f;
    for (const auto& pair : c["first_top_logits"]) {
      const size_t id = pair[0].get<size_t>();
      differing += logits[id] != pair[1].get<float>();
      worst = std::max(worst, std::abs(logits[id] - pair[1].get<float>()));
    }
    EXPECT_EQ(differing, 0) << differing << " of the top-32 first-step logits differ (max |diff| " << worst
                            << ") for " << c["text"];
    worst_all = std::max(worst_all, worst);
  }
  EXPECT_EQ(changed, static_cast<int>(cases.size())) << "the adapter must change every continuation";
  std::printf("with adapter: %d of %zu continuations identical to llama.cpp; top-32 first-step max |diff| %.4f\n",
              exact, cases.size(), static_cast<double>(worst_all));
}

}  // namespace
}  // namespace vigil
