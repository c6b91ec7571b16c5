// Formats OpenAI response bodies, streaming chunks (SSE) and error objects.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace vigil {

// What every response and chunk of one request repeats.
struct ResponseMeta {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;       // "cmpl-N" or "chatcmpl-N"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

// {"error":{"message","type","param","code"}}; param and code are null when empty.
std::string error_body(const ApiError& error);

// A whole non-streamed response: text_completion or chat.completion, with usage.
std::string completion_body(const ResponseMeta& meta, std::string_view text, std::string_view finish_reason,
                            const Usage& usage);

// One SSE event `data: {...}\n\n`. finish_reason empty: not finished (null). A chat stream's first
// chunk carries the assistant role. With include_usage every chunk has "usage": null, as OpenAI's.
std::string stream_chunk(const ResponseMeta& meta, std::string_view text, std::string_view finish_reason,
                         bool first, bool include_usage);
// The last chunk before [DONE] when stream_options.include_usage: no choices, the usage counts.
std::string stream_usage_chunk(const ResponseMeta& meta, const Usage& usage);
// An error after the stream started (the status line is gone): `data: {"error":...}`.
std::string stream_error(const ApiError& error);
inline constexpr std::string_view kStreamDone = "data: [DONE]\n\n";

// GET /v1/models: the base model, then each LoRA adapter (vLLM's shape: "parent" is the base).
std::string models_body(const std::string& model, const std::vector<std::string>& adapters, int64_t created,
                        int max_context);

}  // namespace vigil
