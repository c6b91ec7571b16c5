// Decoding against llama.cpp's fixtures: the greedy loop and the exact comparison.
#include "worker/model/llama_cpp_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

namespace vigil::test {

std::string fixture_path(const std::string& name) { return std::string(VIGIL_SOURCE_DIR "/tests/fixtures/") + name; }

nlohmann::json load_fixture(const std::string& name) {
  std::ifstream in(fixture_path(name));
  if (!in) throw std::runtime_error("tests/fixtures/" + name + " missing");
  return nlohmann::json::parse(in);
}

std::vector<int32_t> greedy_decode(const LlamaModel& model, const std::vector<int32_t>& prompt, int n,
                                   const LoraAdapter* adapter, std::vector<float>* first_logits) {
  const int n_ctx = static_cast<int>(prompt.size()) + n;
  KvCache cache(model.hparams(), (n_ctx + 15) / 16, 16);
  KvBlockAllocator blocks(cache.n_blocks());
  ThreadPool pool(2);
  CpuForward cpu(model, cache, pool, static_cast<int>(prompt.size()), n_ctx);
  KvSequence seq;
  EXPECT_TRUE(blocks.reserve(seq, n_ctx, 16));
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({.token = prompt[i], .pos = static_cast<int32_t>(i), .seq = &seq, .want_logits = i + 1 == prompt.size(), .adapter = adapter});
  cpu.forward(batch);
  std::vector<int32_t> out;
  for (int step = 0; step < n; ++step) {
    auto logits = cpu.logits(0);
    if (step == 0 && first_logits) first_logits->assign(logits.begin(), logits.end());
    out.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    BatchToken next{.token = out.back(),
                    .pos = static_cast<int32_t>(prompt.size()) + step,
                    .seq = &seq,
                    .want_logits = true,
                    .adapter = adapter,
                    .generated = true};
    cpu.forward({&next, 1});
  }
  return out;
}

float expect_as_llama_cpp(const nlohmann::json& c, const std::vector<int32_t>& got,
                          const std::vector<float>& first_logits) {
  const auto want = c["generated_ids"].get<std::vector<int32_t>>();
  const auto margins = c["generated_margins"].get<std::vector<float>>();
  const size_t split = static_cast<size_t>(std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin());
  EXPECT_EQ(split, want.size()) << "continuation parts from llama.cpp at step " << split
                                << " (llama.cpp's top-1/top-2 margin there "
                                << (split < want.size() ? margins[split] : 0.0f) << "): " << c["text"];
  int differing = 0;
  float worst = 0.0f;
  for (const auto& pair : c["first_top_logits"]) {
    const float got_logit = first_logits[pair[0].get<size_t>()];
    differing += got_logit != pair[1].get<float>();
    worst = std::max(worst, std::abs(got_logit - pair[1].get<float>()));
  }
  EXPECT_EQ(differing, 0) << differing << " of the top-32 first-step logits differ (max |diff| " << worst
                          << ") for " << c["text"];
  return worst;
}

}  // namespace vigil::test
