// Parses and validates OpenAI /v1/completions and /v1/chat/completions request bodies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/sampler.h"
#include "server/api_error.h"

namespace vigil {

enum class ApiKind { kCompletion, kChat };

struct ChatTurn {
  std::string role;  // system, user, assistant
  std::string content;
};

struct CompletionRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;                     // empty: the base model
  std::string prompt_text;               // completions: a string prompt
  std::vector<int32_t> prompt_tokens;    // completions: a token-id prompt (prompt_is_tokens)
  bool prompt_is_tokens = false;
  std::vector<ChatTurn> messages;        // chat
  std::optional<int> max_tokens;         // absent: the API's default (see resolve_max_tokens)
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;            // stream_options.include_usage
  int priority = 0;
  bool priority_sent = false;            // the field was present: refused unless the server allows it
  bool ignore_eos = false;
};

// Parses a JSON body. Malformed JSON, wrong types and out-of-range values give a 400 ApiError
// whose `param` names the field. Unknown fields are ignored, as OpenAI-compatible servers do.
std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body, ApiKind kind);

// OpenAI's defaults: 16 tokens for completions; for chat, whatever room the context leaves.
int resolve_max_tokens(const CompletionRequest& request, int prompt_tokens, int max_context);

}  // namespace vigil
