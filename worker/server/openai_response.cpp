// Response formatting. Generated text may hold invalid UTF-8 (a model can emit any bytes), so
// every dump replaces bad bytes with U+FFFD instead of throwing.
#include "server/openai_response.h"

#include <nlohmann/json.hpp>

namespace vigil {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json null_if_empty(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json envelope(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

std::string error_body(const ApiError& e) {
  return dump({{"error",
                {{"message", e.message}, {"type", e.type}, {"param", null_if_empty(e.param)},
                 {"code", null_if_empty(e.code)}}}});
}

std::string completion_body(const ResponseMeta& meta, std::string_view text, std::string_view finish_reason,
                            const Usage& usage) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  json out;
  if (meta.kind == ApiKind::kCompletion) {
    choice["text"] = text;
    out = envelope(meta, "text_completion");
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    out = envelope(meta, "chat.completion");
  }
  out["choices"] = json::array({choice});
  out["usage"] = usage_json(usage);
  return dump(out);
}

std::string stream_chunk(const ResponseMeta& meta, std::string_view text, std::string_view finish_reason,
                         bool first, bool include_usage) {
  json choice = {{"index", 0}, {"logprobs", nullptr},
                 {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
  json out;
  if (meta.kind == ApiKind::kCompletion) {
    choice["text"] = text;
    out = envelope(meta, "text_completion");
  } else {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
    out = envelope(meta, "chat.completion.chunk");
  }
  out["choices"] = json::array({choice});
  if (include_usage) out["usage"] = nullptr;
  return sse(out);
}

std::string stream_usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json out = envelope(meta, meta.kind == ApiKind::kCompletion ? "text_completion" : "chat.completion.chunk");
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return sse(out);
}

std::string stream_error(const ApiError& error) { return "data: " + error_body(error) + "\n\n"; }

std::string models_body(const std::string& model, const std::vector<std::string>& adapters, int64_t created,
                        int max_context) {
  json data = json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "vigil"},
                            {"root", model}, {"parent", nullptr}, {"max_model_len", max_context}}});
  for (const auto& a : adapters)
    data.push_back({{"id", a}, {"object", "model"}, {"created", created}, {"owned_by", "vigil"}, {"root", a},
                    {"parent", model}, {"max_model_len", max_context}});
  return dump({{"object", "list"}, {"data", data}});
}

}  // namespace vigil
