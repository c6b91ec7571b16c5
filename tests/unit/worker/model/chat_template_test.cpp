// Chat template tests: Jinja's rendering of the GGUF's template (fixture) and role validation.
#include "model/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "model/gguf.h"

namespace vigil {
namespace {

using nlohmann::json;

const json& fixture() {
  static const json doc = [] {
    std::ifstream in(VIGIL_SOURCE_DIR "/tests/fixtures/chat_template.json");
    return json::parse(in);
  }();
  return doc;
}

std::vector<ChatMessage> messages_of(const json& c) {
  std::vector<ChatMessage> out;
  for (const json& m : c["messages"])
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

TEST(ChatTemplate, MatchesJinjaOnEveryFixtureCase) {
  ASSERT_GE(fixture()["cases"].size(), 20u);
  for (const json& c : fixture()["cases"]) {
    EXPECT_EQ(apply_chat_template(messages_of(c), c["add_generation_prompt"].get<bool>()),
              c["rendered"].get<std::string>())
        << c["messages"].dump();
  }
}

TEST(ChatTemplate, FixtureTemplateIsTheOneInTheModel) {
  if (!std::filesystem::exists(VIGIL_MODEL_PATH))
    GTEST_FAIL() << VIGIL_MODEL_PATH << " missing: run scripts/fetch_model.sh";
  const GgufFile file = GgufFile::open(VIGIL_MODEL_PATH);
  EXPECT_EQ(file.get_string("tokenizer.chat_template"), fixture()["template"].get<std::string>());
}

TEST(ChatTemplate, DefaultSystemPromptOnlyWhenFirstIsNotSystem) {
  const std::vector<ChatMessage> user_first = {{"user", "hi"}};
  EXPECT_EQ(
      apply_chat_template(user_first, false),
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
      "<|im_start|>user\nhi<|im_end|>\n");
  const std::vector<ChatMessage> system_first = {{"system", "S"}, {"user", "hi"}};
  EXPECT_EQ(apply_chat_template(system_first, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, UnknownRoleIsRejectedByIndex) {
  const std::vector<ChatMessage> bad = {{"user", "hi"}, {"User", "again"}};
  try {
    apply_chat_template(bad, true);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "chat message 1 has role 'User'; expected system, user, assistant or tool");
  }
  const std::vector<ChatMessage> empty_role = {{"", "x"}};
  EXPECT_THROW(apply_chat_template(empty_role, false), std::invalid_argument);
}

}  // namespace
}  // namespace vigil
