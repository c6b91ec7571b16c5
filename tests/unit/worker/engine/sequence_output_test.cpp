// SequenceOutput on the real tokenizer: how a sequence ends (end-of-generation token, stop string,
// token limit) and which text it emits, the one rule the engine and the CLI's generator share.
#include "engine/sequence_output.h"

#include <gtest/gtest.h>

#include "model/llama_model.h"
#include "model/vocab.h"

namespace vigil {
namespace {

class SequenceOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = LlamaModel::load(VIGIL_MODEL_PATH).release();
    vocab_ = new Vocab(Vocab::from_gguf(model_->file()));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete model_;
  }
  static std::vector<int32_t> tokens(const std::string& text) { return vocab_->encode(text, false); }
  // A token whose piece is one UTF-8 lead byte: a character cut in half.
  static int32_t lead_byte_token() {
    for (int32_t t = 0; t < static_cast<int32_t>(vocab_->size()); ++t) {
      const std::string piece = vocab_->token_to_piece(t);
      if (piece.size() == 1 && static_cast<unsigned char>(piece[0]) >= 0xC2 && static_cast<unsigned char>(piece[0]) < 0xF5)
        return t;
    }
    return -1;
  }

  static LlamaModel* model_;
  static Vocab* vocab_;
};
LlamaModel* SequenceOutputTest::model_ = nullptr;
Vocab* SequenceOutputTest::vocab_ = nullptr;

TEST_F(SequenceOutputTest, EndOfGenerationStopsWithoutText) {
  SequenceOutput out(*vocab_, {}, 16, false);
  std::string text;
  for (int32_t t : tokens("Hello")) EXPECT_EQ(out.push(t, text), FinishReason::kNone);
  EXPECT_EQ(out.push(vocab_->eos(), text), FinishReason::kStop);
  EXPECT_EQ(text + out.flush(), "Hello");
  EXPECT_EQ(out.generated(), static_cast<int>(tokens("Hello").size()) + 1);
}

TEST_F(SequenceOutputTest, IgnoreEosRunsToTheLimit) {
  SequenceOutput out(*vocab_, {}, 2, true);
  std::string text;
  EXPECT_EQ(out.push(vocab_->eos(), text), FinishReason::kNone);
  EXPECT_EQ(out.push(vocab_->eos(), text), FinishReason::kLength);
}

TEST_F(SequenceOutputTest, StopStringAcrossTokensEndsTheTextBeforeIt) {
  const std::vector<int32_t> ids = tokens("one two three four");
  ASSERT_GE(ids.size(), 4u);
  SequenceOutput out(*vocab_, {"e fo"}, 64, false);
  std::string text;
  FinishReason reason = FinishReason::kNone;
  for (size_t i = 0; i < ids.size() && reason == FinishReason::kNone; ++i) reason = out.push(ids[i], text);
  EXPECT_EQ(reason, FinishReason::kStop);
  EXPECT_EQ(text + out.flush(), "one two thre");
}

TEST_F(SequenceOutputTest, TokenLimitIsLengthAndFlushReleasesTheHeldBack) {
  const std::vector<int32_t> ids = tokens("abc ST");
  SequenceOutput out(*vocab_, {"STOP"}, static_cast<int>(ids.size()), false);
  std::string text;
  for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(out.push(ids[i], text), FinishReason::kNone);
  EXPECT_EQ(out.push(ids.back(), text), FinishReason::kLength);
  EXPECT_EQ(text, "abc ") << "the start of a possible stop string is held back";
  EXPECT_EQ(out.flush(), "ST");
}

TEST_F(SequenceOutputTest, HalfACharacterIsHeldUntilTheEnd) {
  const int32_t lead = lead_byte_token();
  ASSERT_GE(lead, 0) << "no single-lead-byte token in the vocabulary";
  SequenceOutput out(*vocab_, {}, 1, false);
  std::string text;
  EXPECT_EQ(out.push(lead, text), FinishReason::kLength);
  EXPECT_EQ(text, "");
  EXPECT_EQ(out.flush(), vocab_->token_to_piece(lead));
}

TEST(FinishReason, NamesAreTheApis) {
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::kCancelled), "cancelled");
  EXPECT_STREQ(finish_reason_name(FinishReason::kError), "error");
}

}  // namespace
}  // namespace vigil
