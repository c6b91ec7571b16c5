// Tests for OpenAI request parsing: accepted shapes, and 400s that name the offending field.
#include "server/openai_request.h"

#include <random>

#include <gtest/gtest.h>

namespace vigil {
namespace {

CompletionRequest ok(const std::string& body, ApiKind kind = ApiKind::kCompletion) {
  auto r = parse_completion_request(body, kind);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << e->message;
    return {};
  }
  return std::get<CompletionRequest>(r);
}

ApiError err(const std::string& body, ApiKind kind = ApiKind::kCompletion) {
  auto r = parse_completion_request(body, kind);
  if (auto* e = std::get_if<ApiError>(&r)) return *e;
  ADD_FAILURE() << "no error for " << body;
  return {};
}

TEST(OpenAiRequest, CompletionWithEveryField) {
  auto r = ok(R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":40,
                 "min_p":0.05,"presence_penalty":0.1,"frequency_penalty":0.2,"repetition_penalty":1.1,
                 "seed":-1,"stop":["a","b"],"stream":true,"stream_options":{"include_usage":true},
                 "priority":3,"ignore_eos":true,"user":"ignored"})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_FALSE(r.prompt_is_tokens);
  EXPECT_EQ(*r.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 0.2f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.seed, UINT64_MAX);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.priority, 3);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(OpenAiRequest, PromptShapes) {
  auto r = ok(R"({"prompt":[1,2,3]})");
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ok(R"({"prompt":["one"]})").prompt_text, "one");
  EXPECT_EQ(ok(R"({"prompt":"x","stop":"end"})").stop, std::vector<std::string>{"end"});
  EXPECT_EQ(ok(R"({"prompt":"x","top_k":-1})").sampling.top_k, 0);
  EXPECT_FALSE(ok(R"({"prompt":"x","max_tokens":null})").max_tokens.has_value());
}

TEST(OpenAiRequest, MaxCompletionTokensWins) {
  EXPECT_EQ(*ok(R"({"prompt":"x","max_tokens":5,"max_completion_tokens":7})").max_tokens, 7);
}

TEST(OpenAiRequest, ChatMessages) {
  auto r = ok(R"({"messages":[{"role":"developer","content":"be brief"},
                             {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})",
              ApiKind::kChat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
}

TEST(OpenAiRequest, ErrorsNameTheField) {
  EXPECT_EQ(err("{not json").param, "body");
  EXPECT_EQ(err("[1]").param, "body");
  EXPECT_EQ(err("{}").param, "prompt");
  EXPECT_EQ(err(R"({"prompt":5})").param, "prompt");
  EXPECT_EQ(err(R"({"prompt":[[1],[2]]})").param, "prompt");
  EXPECT_EQ(err(R"({"prompt":[1,-2]})").param, "prompt[1]");
  EXPECT_EQ(err(R"({"prompt":"x","max_tokens":"5"})").param, "max_tokens");
  EXPECT_EQ(err(R"({"prompt":"x","max_tokens":0})").param, "max_tokens");
  EXPECT_EQ(err(R"({"prompt":"x","max_tokens":1.5})").param, "max_tokens");
  EXPECT_EQ(err(R"({"prompt":"x","temperature":"hot"})").param, "temperature");
  EXPECT_EQ(err(R"({"prompt":"x","temperature":-1})").param, "temperature");
  EXPECT_EQ(err(R"({"prompt":"x","top_p":0})").param, "top_p");
  EXPECT_EQ(err(R"({"prompt":"x","stream":"yes"})").param, "stream");
  EXPECT_EQ(err(R"({"prompt":"x","stream_options":{"include_usage":1}})").param, "stream_options.include_usage");
  EXPECT_EQ(err(R"({"prompt":"x","stop":[1]})").param, "stop[0]");
  EXPECT_EQ(err(R"({"prompt":"x","stop":""})").param, "stop");
  EXPECT_EQ(err(R"({"prompt":"x","model":3})").param, "model");
  EXPECT_EQ(err(R"({"prompt":"x","seed":"a"})").param, "seed");
  EXPECT_EQ(err(R"({"prompt":"x","n":2})").param, "n");
  EXPECT_EQ(err(R"({"prompt":"x","echo":true})").param, "echo");
  EXPECT_EQ(err(R"({"prompt":"x","priority":true})").param, "priority");
  EXPECT_EQ(err(R"({"messages":[]})", ApiKind::kChat).param, "messages");
  EXPECT_EQ(err(R"({"messages":[{"role":"robot","content":"x"}]})", ApiKind::kChat).param, "messages[0].role");
  EXPECT_EQ(err(R"({"messages":[{"role":"user"}]})", ApiKind::kChat).param, "messages[0].content");
  EXPECT_EQ(err(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", ApiKind::kChat).param,
            "messages[0].content[0].type");
  ApiError e = err(R"({"prompt":"x","temperature":"hot"})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_NE(e.message.find("temperature"), std::string::npos);
}

TEST(OpenAiRequest, InvalidUtf8IsMalformed) {
  EXPECT_EQ(err("{\"prompt\":\"\xff\"}").param, "body");
}

// Found by openai_request_fuzz: nlohmann's parser throws out_of_range, not parse_error, for a
// number beyond double's range, and it escaped the parser (and the HTTP handler) uncaught.
TEST(OpenAiRequest, NumberOverflowIsMalformed) {
  ApiError e = err(R"({"prompt":"x","temperature":1e400})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "body");
  EXPECT_NE(e.message.find("number overflow"), std::string::npos) << e.message;
  EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"seed":-1e999})", ApiKind::kChat).param, "body");
}

TEST(OpenAiRequest, DefaultMaxTokens) {
  CompletionRequest c;
  EXPECT_EQ(resolve_max_tokens(c, 10, 100), 16);
  c.kind = ApiKind::kChat;
  EXPECT_EQ(resolve_max_tokens(c, 10, 100), 90);
  c.max_tokens = 5;
  EXPECT_EQ(resolve_max_tokens(c, 10, 100), 5);
}

// Outside input: mutated bodies never throw, and every rejection is a 400 naming a field.
TEST(OpenAiRequest, MutatedBodiesGiveAnAnswerNeverAThrow) {
  const std::string seeds[] = {
      R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"stop":["a"],"stream":true})",
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"seed":7,"top_k":3})",
      R"({"prompt":[1,2,3],"stream_options":{"include_usage":true},"priority":-2})"};
  std::mt19937 rng(42);
  const std::string alphabet = "{}[]\":,0123456789.-eE truefalsnul\\\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string body = seeds[static_cast<size_t>(i) % 3];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const size_t pos = rng() % body.size();
      switch (rng() % 3) {
        case 0: body[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: body.erase(pos, 1 + rng() % 8); break;
        default: body.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
      }
    }
    const ApiKind kind = i % 3 == 1 ? ApiKind::kChat : ApiKind::kCompletion;
    std::variant<CompletionRequest, ApiError> r;
    ASSERT_NO_THROW(r = parse_completion_request(body, kind)) << body;
    if (auto* e = std::get_if<ApiError>(&r)) {
      EXPECT_EQ(e->status, 400) << body;
      EXPECT_FALSE(e->param.empty()) << body;
    }
  }
}

}  // namespace
}  // namespace vigil
