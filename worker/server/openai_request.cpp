// Request parsing: every field is type-checked by hand so a 400 can name exactly what is wrong.
#include "server/openai_request.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

namespace vigil {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxStops = 16;

// Thrown inside the parser and turned into the ApiError result at the top.
struct FieldError {
  std::string param;
  std::string message;
};

[[noreturn]] void bad(const std::string& param, const std::string& what) {
  throw FieldError{param, param + ": " + what};
}

// The field, or nullptr when it is absent or JSON null (OpenAI treats null as "not given").
const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string get_string(const json& v, const std::string& param) {
  if (!v.is_string()) bad(param, "expected a string");
  return v.get<std::string>();
}

bool get_bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) bad(param, "expected a boolean");
  return v.get<bool>();
}

int64_t get_int(const json& v, const std::string& param, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(param, "expected an integer");
  int64_t n = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    n = u > static_cast<uint64_t>(hi) ? hi + 1 : static_cast<int64_t>(u);
  } else {
    n = v.get<int64_t>();
  }
  if (n < lo || n > hi) bad(param, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return n;
}

float get_float(const json& v, const std::string& param) {
  if (!v.is_number()) bad(param, "expected a number");
  return static_cast<float>(v.get<double>());
}

void parse_prompt(const json& v, CompletionRequest& r) {
  if (v.is_string()) {
    r.prompt_text = v.get<std::string>();
    return;
  }
  if (!v.is_array()) bad("prompt", "expected a string or an array of token ids");
  if (v.size() == 1 && v[0].is_string()) {  // a one-element batch is the same prompt
    r.prompt_text = v[0].get<std::string>();
    return;
  }
  r.prompt_is_tokens = true;
  r.prompt_tokens.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].is_string() || v[i].is_array()) bad("prompt", "batched prompts are not supported; send one per request");
    r.prompt_tokens.push_back(static_cast<int32_t>(
        get_int(v[i], "prompt[" + std::to_string(i) + "]", 0, std::numeric_limits<int32_t>::max())));
  }
}

std::string message_content(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(param, "expected a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part = param + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) bad(part, "expected an object");
    const json* type = field(v[i], "type");
    if (!type || get_string(*type, part + ".type") != "text") bad(part + ".type", "only \"text\" parts are supported");
    const json* t = field(v[i], "text");
    if (!t) bad(part + ".text", "is required");
    text += get_string(*t, part + ".text");
  }
  return text;
}

void parse_messages(const json& v, CompletionRequest& r) {
  if (!v.is_array()) bad("messages", "expected an array");
  if (v.empty()) bad("messages", "must not be empty");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!v[i].is_object()) bad(p, "expected an object");
    const json* role = field(v[i], "role");
    if (!role) bad(p + ".role", "is required");
    ChatTurn turn;
    turn.role = get_string(*role, p + ".role");
    if (turn.role == "developer") turn.role = "system";  // OpenAI's newer name for the system role
    if (turn.role != "system" && turn.role != "user" && turn.role != "assistant")
      bad(p + ".role", "expected system, developer, user or assistant, got '" + turn.role + "'");
    const json* content = field(v[i], "content");
    if (!content) bad(p + ".content", "is required");
    turn.content = message_content(*content, p + ".content");
    r.messages.push_back(std::move(turn));
  }
}

void parse_stop(const json& v, CompletionRequest& r) {
  if (v.is_string()) {
    r.stop.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > kMaxStops) bad("stop", "at most " + std::to_string(kMaxStops) + " stop strings");
    for (size_t i = 0; i < v.size(); ++i) r.stop.push_back(get_string(v[i], "stop[" + std::to_string(i) + "]"));
  } else {
    bad("stop", "expected a string or an array of strings");
  }
  if (std::any_of(r.stop.begin(), r.stop.end(), [](const std::string& s) { return s.empty(); }))
    bad("stop", "stop strings must not be empty");
}

// Features of the OpenAI API that would change the answer's shape; refusing beats ignoring them.
void reject_unsupported(const json& root) {
  if (const json* n = field(root, "n"); n && get_int(*n, "n", 1, 1) != 1) bad("n", "only 1 is supported");
  if (const json* b = field(root, "best_of"); b) get_int(*b, "best_of", 1, 1);
  if (const json* e = field(root, "echo"); e && get_bool(*e, "echo")) bad("echo", "is not supported");
  if (const json* l = field(root, "logprobs"); l && !(l->is_boolean() && !l->get<bool>()))
    bad("logprobs", "is not supported");
  if (const json* s = field(root, "suffix"); s) bad("suffix", "is not supported");
}

void parse_fields(const json& root, CompletionRequest& r) {
  if (!root.is_object()) bad("body", "expected a JSON object");
  reject_unsupported(root);
  if (const json* v = field(root, "model")) r.model = get_string(*v, "model");
  if (r.kind == ApiKind::kCompletion) {
    const json* p = field(root, "prompt");
    if (!p) bad("prompt", "is required");
    parse_prompt(*p, r);
  } else {
    const json* m = field(root, "messages");
    if (!m) bad("messages", "is required");
    parse_messages(*m, r);
  }
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  if (const json* v = field(root, "max_tokens")) r.max_tokens = static_cast<int>(get_int(*v, "max_tokens", 1, kMaxInt));
  if (const json* v = field(root, "max_completion_tokens"))
    r.max_tokens = static_cast<int>(get_int(*v, "max_completion_tokens", 1, kMaxInt));
  SamplingParams& s = r.sampling;
  if (const json* v = field(root, "temperature")) s.temperature = get_float(*v, "temperature");
  if (const json* v = field(root, "top_p")) s.top_p = get_float(*v, "top_p");
  if (const json* v = field(root, "top_k")) {
    int64_t k = get_int(*v, "top_k", -1, kMaxInt);
    s.top_k = k < 0 ? 0 : static_cast<int>(k);  // vLLM's -1 means "off", as our 0 does
  }
  if (const json* v = field(root, "min_p")) s.min_p = get_float(*v, "min_p");
  if (const json* v = field(root, "presence_penalty")) s.presence_penalty = get_float(*v, "presence_penalty");
  if (const json* v = field(root, "frequency_penalty")) s.frequency_penalty = get_float(*v, "frequency_penalty");
  if (const json* v = field(root, "repetition_penalty")) s.repetition_penalty = get_float(*v, "repetition_penalty");
  if (const json* v = field(root, "seed")) {
    if (!v->is_number_integer()) bad("seed", "expected an integer");
    // OpenAI seeds are signed 64-bit; any bit pattern is a fine seed.
    s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (std::string err = s.validate(); !err.empty()) {
    auto colon = err.find(':');
    bad(err.substr(0, colon), colon == std::string::npos ? err : err.substr(colon + 2));
  }
  if (const json* v = field(root, "stop")) parse_stop(*v, r);
  if (const json* v = field(root, "stream")) r.stream = get_bool(*v, "stream");
  if (const json* v = field(root, "stream_options")) {
    if (!v->is_object()) bad("stream_options", "expected an object");
    if (const json* u = field(*v, "include_usage")) r.include_usage = get_bool(*u, "stream_options.include_usage");
  }
  if (const json* v = field(root, "priority")) {
    r.priority = static_cast<int>(get_int(*v, "priority", -1000000, 1000000));
    r.priority_sent = true;
  }
  if (const json* v = field(root, "ignore_eos")) r.ignore_eos = get_bool(*v, "ignore_eos");
}

}  // namespace

std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body, ApiKind kind) {
  json root;
  try {
    root = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past double's range
    return ApiError::bad_request(std::string("malformed JSON body: ") + e.what(), "body");
  }
  CompletionRequest r;
  r.kind = kind;
  try {
    parse_fields(root, r);
  } catch (const FieldError& e) {
    return ApiError::bad_request(e.message, e.param);
  }
  return r;
}

int resolve_max_tokens(const CompletionRequest& request, int prompt_tokens, int max_context) {
  if (request.max_tokens) return *request.max_tokens;
  if (request.kind == ApiKind::kCompletion) return 16;
  return std::max(1, max_context - prompt_tokens);
}

}  // namespace vigil
