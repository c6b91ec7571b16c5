// The forward pass with a LoRA adapter against llama.cpp with the same adapter file: greedy
// continuations token for token and first-step logits bit for bit (fixtures from
// scripts/gen_lora_reference.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "backend/cpu/cpu_forward.h"
#include "worker/model/llama_cpp_reference.h"

namespace vigil {
namespace {

// As llama_reference_test: the base model is bitwise llama.cpp's, and the adapter's products are
// F32/F16 matmuls like ggml's, so nothing may differ.

class LoraReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LlamaModel::load(VIGIL_MODEL_PATH).release();
    fixture_ = new nlohmann::json(test::load_fixture("lora_greedy.json"));
    adapter_ = new std::shared_ptr<const LoraAdapter>(
        LoraAdapter::load(test::fixture_path((*fixture_)["adapter"].get<std::string>()), *model_));
  }
  static void TearDownTestSuite() {
    delete adapter_;
    delete fixture_;
    delete model_;
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
    std::vector<float> logits;
    const auto got = test::greedy_decode(*model_, prompt, static_cast<int>(want.size()), adapter_->get(), &logits);
    exact += got == want;
    changed += got != test::greedy_decode(*model_, prompt, static_cast<int>(want.size()), nullptr, nullptr);
    worst_all = std::max(worst_all, test::expect_as_llama_cpp(c, got, logits));
  }
  EXPECT_EQ(changed, static_cast<int>(cases.size())) << "the adapter must change every continuation";
  std::printf("with adapter: %d of %zu continuations identical to llama.cpp; top-32 first-step max |diff| %.4f\n",
              exact, cases.size(), static_cast<double>(worst_all));
}

}  // namespace
}  // namespace vigil
