// A prompt computed in chunks of any number of tokens, each chunk but the first starting inside a
// partly written KV block and sharing its forward pass with another sequence's decode, leaves the
// same K/V in the cache and the same logits, bit for bit, as the prompt in one pass.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_forward.h"

namespace vigil {
namespace {

constexpr int kBlock = 16;
constexpr int kPrompt = 45;  // ends inside the third block
constexpr int kContext = 64;

class ChunkedPrefill : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = LlamaModel::load(VIGIL_MODEL_PATH).release(); }
  static void TearDownTestSuite() { delete model_; }

  ChunkedPrefill() : cache_(model_->hparams(), 16, kBlock), blocks_(16), forward_(*model_, cache_, pool_, kContext, kContext) {}

  static int32_t prompt_token(int pos) { return 1 + (pos * 7919) % (model_->hparams().n_vocab - 1); }

  // Logits after each position of the prompt, in one pass.
  std::vector<std::vector<float>> whole(KvSequence& seq) {
    std::vector<BatchToken> batch;
    for (int p = 0; p < kPrompt; ++p) batch.push_back({.token = prompt_token(p), .pos = p, .seq = &seq, .want_logits = true});
    forward_.forward(batch);
    std::vector<std::vector<float>> out;
    for (int p = 0; p < kPrompt; ++p) {
      const auto row = forward_.logits(p);
      out.emplace_back(row.begin(), row.end());
    }
    return out;
  }

  bool same_kv(const KvSequence& a, const KvSequence& b, int positions) const {
    const size_t bytes = static_cast<size_t>(cache_.kv_dim()) * sizeof(uint16_t);
    for (int l = 0; l < model_->hparams().n_layer; ++l)
      for (int p = 0; p < positions; ++p) {
        const int32_t ba = a.blocks[static_cast<size_t>(p / kBlock)], bb = b.blocks[static_cast<size_t>(p / kBlock)];
        if (std::memcmp(cache_.k(l, ba, p % kBlock), cache_.k(l, bb, p % kBlock), bytes) != 0 ||
            std::memcmp(cache_.v(l, ba, p % kBlock), cache_.v(l, bb, p % kBlock), bytes) != 0)
          return false;
      }
    return true;
  }

  static LlamaModel* model_;
  KvCache cache_;
  KvBlockAllocator blocks_;
  ThreadPool pool_{2};
  CpuForward forward_;
};

LlamaModel* ChunkedPrefill::model_ = nullptr;

TEST_F(ChunkedPrefill, ChunksOf1_3And7BesideADecodeEqualOnePass) {
  KvSequence reference;
  ASSERT_TRUE(blocks_.reserve(reference, kPrompt, kBlock));
  const std::vector<std::vector<float>> expected = whole(reference);

  // A stream decoding beside the chunks: its context once, then the same decode token in every step.
  KvSequence decoder;
  ASSERT_TRUE(blocks_.reserve(decoder, 9, kBlock));
  std::vector<BatchToken> batch;
  for (int p = 0; p < 8; ++p) batch.push_back({.token = prompt_token(100 + p), .pos = p, .seq = &decoder, .want_logits = p == 7});
  forward_.forward(batch);
  const BatchToken decode{.token = prompt_token(200), .pos = 8, .seq = &decoder, .want_logits = true, .generated = true};
  forward_.forward(std::span(&decode, 1));
  const auto alone = forward_.logits(0);
  const std::vector<float> decode_alone(alone.begin(), alone.end());

  for (int chunk : {1, 3, 7}) {
    KvSequence seq;
    ASSERT_TRUE(blocks_.reserve(seq, kPrompt, kBlock));
    for (int begin = 0; begin < kPrompt; begin += chunk) {
      const int end = std::min(kPrompt, begin + chunk);
      batch.assign(1, decode);
      for (int p = begin; p < end; ++p) batch.push_back({.token = prompt_token(p), .pos = p, .seq = &seq, .want_logits = p + 1 == end});
      forward_.forward(batch);
      ASSERT_EQ(forward_.n_logits(), 2);
      const auto got_decode = forward_.logits(0);
      ASSERT_EQ(std::memcmp(got_decode.data(), decode_alone.data(), decode_alone.size() * sizeof(float)), 0)
          << "chunks of " << chunk << ": the decode beside positions [" << begin << ", " << end << ")";
      const auto got = forward_.logits(1);
      const auto& want = expected[static_cast<size_t>(end - 1)];
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << "chunks of " << chunk << ": logits after position " << end - 1 << " (chunk from " << begin << ")";
    }
    EXPECT_TRUE(same_kv(seq, reference, kPrompt)) << "chunks of " << chunk;
    blocks_.release(seq);
  }
}

}  // namespace
}  // namespace vigil
