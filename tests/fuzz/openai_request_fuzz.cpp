// libFuzzer target: an OpenAI request body (first byte: completions or chat, the rest: the body)
// parses to a request whose every field is valid, or to a 400 naming a field with a message.
// The parser must not throw at all: the HTTP layer answers whatever it returns.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "server/openai_request.h"

namespace {

void check_request(const vigil::CompletionRequest& r, vigil::ApiKind kind) {
  if (r.kind != kind || !r.sampling.validate().empty()) std::abort();
  if (kind == vigil::ApiKind::kChat) {
    if (r.messages.empty()) std::abort();
    for (const auto& m : r.messages)
      if (m.role != "system" && m.role != "user" && m.role != "assistant") std::abort();
  } else {
    for (int32_t t : r.prompt_tokens)
      if (t < 0) std::abort();
    if (!r.prompt_is_tokens && !r.prompt_tokens.empty()) std::abort();
  }
  if (r.max_tokens && *r.max_tokens < 1) std::abort();
  if (r.stop.size() > 16) std::abort();
  for (const auto& s : r.stop)
    if (s.empty()) std::abort();
  if (r.priority < -1000000 || r.priority > 1000000) std::abort();
  if (vigil::resolve_max_tokens(r, 100, 2048) < 1) std::abort();
}

void check_error(const vigil::ApiError& e) {
  if (e.status != 400 || e.type != "invalid_request_error" || e.message.empty() || e.param.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto kind = (data[0] & 1) ? vigil::ApiKind::kChat : vigil::ApiKind::kCompletion;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = vigil::parse_completion_request(body, kind);
  if (const auto* r = std::get_if<vigil::CompletionRequest>(&parsed))
    check_request(*r, kind);
  else
    check_error(std::get<vigil::ApiError>(parsed));
  return 0;
}
