// Tests for OpenAI response formatting: body shapes, SSE framing, usage, errors, bad UTF-8.
#include "server/openai_response.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/unicode.h"
#include "model/vocab.h"

namespace vigil {
namespace {

using json = nlohmann::json;

json sse_json(const std::string& event) {
  EXPECT_EQ(event.rfind("data: ", 0), 0u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  return json::parse(event.substr(6, event.size() - 8));
}

const ResponseMeta kCompletion{ApiKind::kCompletion, "cmpl-1", 1700000000, "smol"};
const ResponseMeta kChat{ApiKind::kChat, "chatcmpl-1", 1700000000, "smol"};

TEST(OpenAiResponse, CompletionBody) {
  json j = json::parse(completion_body(kCompletion, "hello", "length", {3, 4}));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["model"], "smol");
  EXPECT_EQ(j["choices"][0]["text"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
}

TEST(OpenAiResponse, ChatBody) {
  json j = json::parse(completion_body(kChat, "hi", "stop", {1, 1}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
}

TEST(OpenAiResponse, ChatStreamChunks) {
  json first = sse_json(stream_chunk(kChat, "", "", true, false));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(first.contains("usage"));
  json mid = sse_json(stream_chunk(kChat, "ab", "", false, true));
  EXPECT_EQ(mid["choices"][0]["delta"]["content"], "ab");
  EXPECT_FALSE(mid["choices"][0]["delta"].contains("role"));
  EXPECT_TRUE(mid["usage"].is_null());
  json last = sse_json(stream_chunk(kChat, "", "stop", false, false));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
}

TEST(OpenAiResponse, CompletionStreamAndUsage) {
  json c = sse_json(stream_chunk(kCompletion, "x", "length", false, false));
  EXPECT_EQ(c["choices"][0]["text"], "x");
  json u = sse_json(stream_usage_chunk(kCompletion, {2, 5}));
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 7);
  EXPECT_EQ(std::string(kStreamDone), "data: [DONE]\n\n");
}

TEST(OpenAiResponse, ErrorObject) {
  json e = json::parse(error_body(ApiError::bad_request("temperature: expected a number", "temperature")));
  EXPECT_EQ(e["error"]["message"], "temperature: expected a number");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "temperature");
  EXPECT_TRUE(e["error"]["code"].is_null());
  json s = sse_json(stream_error({503, "server_error", "boom", "", "engine_error"}));
  EXPECT_EQ(s["error"]["code"], "engine_error");
  EXPECT_TRUE(s["error"]["param"].is_null());
}

TEST(OpenAiResponse, InvalidUtf8IsReplacedNotThrown) {
  json j = json::parse(completion_body(kCompletion, "a\xff" "b", "stop", {1, 1}));
  EXPECT_EQ(j["choices"][0]["text"], "a\xEF\xBF\xBD" "b");
}

TEST(OpenAiResponse, Models) {
  json m = json::parse(models_body("smol", {"sql-lora"}, 5, 2048));
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 2u);
  EXPECT_EQ(m["data"][0]["id"], "smol");
  EXPECT_TRUE(m["data"][0]["parent"].is_null());
  EXPECT_EQ(m["data"][0]["max_model_len"], 2048);
  EXPECT_EQ(m["data"][1]["id"], "sql-lora");
  EXPECT_EQ(m["data"][1]["parent"], "smol");
}

// The CLI's U+FFFD for bad bytes (with_replacement_characters) is what the server sends for the
// same bytes: nlohmann's encoder with error_handler_t::replace, which the response bodies use.
TEST(ReplacementCharacters, SameAsTheServersJsonEncoder) {
  const std::vector<std::string> cases = {
      "ok",         "ok\xe4\xb8",       "\x80\x80",          "\xff" "a",          "\xe4" "a",
      "\xc0\xaf",   "\xed\xa0\x80",    "\xf4\x90\x80\x80", "\xf0\x9f\x98",     "a\xf0\x9f\x98\x80" "b",
      "\xe0\x80\xaf", "\xc3\xa9\xc3", "\xf5\x80",          "\xe1\x80\xe1\x80"};
  for (const std::string& bytes : cases) {
    const std::string server =
        json::parse(json(bytes).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
    EXPECT_EQ(with_replacement_characters(bytes), server) << json(bytes).dump(-1, ' ', true, json::error_handler_t::replace);
  }
}

}  // namespace
}  // namespace vigil
