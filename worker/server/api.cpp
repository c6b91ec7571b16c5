// The API's routing table and the checks a completion passes before it reaches the engine.
#include "server/api.h"

#include <algorithm>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <variant>

#include <boost/asio/post.hpp>

#include "server/adapter_api.h"

namespace vigil {
namespace {

namespace net = boost::asio;

HttpReply json_reply(int status, std::string body) { return {status, "application/json", std::move(body), {}, false}; }

HttpReply method_not_allowed(std::string_view allowed) {
  ApiError e{405, "invalid_request_error", "method not allowed; use " + std::string(allowed), "", "method_not_allowed"};
  HttpReply r = error_reply(e);
  r.headers.emplace_back("Allow", std::string(allowed));
  return r;
}

// OpenAI answers a missing or wrong key with 401 and code invalid_api_key; its Python client raises
// AuthenticationError on the status. WWW-Authenticate as RFC 6750 asks of a bearer-token server.
HttpReply unauthorized() {
  HttpReply r = error_reply({401, "invalid_request_error",
                             "missing or wrong API key: send the header 'Authorization: Bearer <key>'", "",
                             "invalid_api_key"});
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// 12 hex digits from the OS's entropy source, so two workers (or one restarted) never share an id.
std::string random_id_prefix() {
  std::random_device rd;
  const uint64_t bits = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char out[16];
  std::snprintf(out, sizeof out, "%012llx", static_cast<unsigned long long>(bits & 0xffffffffffffULL));
  return out;
}

}  // namespace

HttpReply error_reply(const ApiError& error) { return json_reply(error.status, error_body(error)); }

Api::Api(ModelService& service, WorkerMetrics& metrics, ServerState& state, std::string model_name)
    : service_(service),
      metrics_(metrics),
      state_(state),
      model_name_(std::move(model_name)),
      created_(static_cast<int64_t>(std::time(nullptr))),
      id_prefix_(random_id_prefix()) {}

Routed Api::route(std::string_view method, std::string_view target, std::string_view authorization,
                  std::string_view body, CompletionJob::Clock::time_point arrival) {
  if (auto refused = check_key(target, authorization)) return {std::move(*refused), nullptr};
  std::string_view path = target.substr(0, target.find('?'));
  const bool get = method == "GET";
  const bool post = method == "POST";
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) return {method_not_allowed("POST"), nullptr};
    return completion(path == "/v1/completions" ? ApiKind::kCompletion : ApiKind::kChat, body, arrival);
  }
  if (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter") {
    if (!post) return {method_not_allowed("POST"), nullptr};
    if (!access_.allow_runtime_adapters)
      return {error_reply({403, "permission_error",
                           "loading and unloading adapters at runtime is off on this server "
                           "(start the worker with --allow-runtime-adapters)",
                           "", "runtime_adapters_disabled"}),
              nullptr};
    return {adapter_endpoint(path == "/v1/load_lora_adapter", body, service_, metrics_, model_name_), nullptr};
  }
  if (path == "/health" || path == "/ready" || path == "/metrics" || path == "/v1/models") {
    if (!get) return {method_not_allowed("GET"), nullptr};
  }
  if (path == "/health") return {json_reply(200, R"({"status":"ok"})"), nullptr};
  if (path == "/ready") {
    if (state_.draining.load()) return {json_reply(503, R"({"status":"draining"})"), nullptr};
    return {json_reply(200, R"({"status":"ready"})"), nullptr};
  }
  if (path == "/metrics")
    return {{200, "text/plain; version=0.0.4; charset=utf-8", metrics_.scrape(service_.stats()), {}, false}, nullptr};
  if (path == "/v1/models")
    return {json_reply(200, models_body(model_name_, service_.adapters(), created_, service_.config().max_context)), nullptr};
  return {error_reply({404, "not_found_error", "no such endpoint: " + std::string(path), "", "not_found"}), nullptr};
}

std::optional<HttpReply> Api::check_key(std::string_view target, std::string_view authorization) {
  std::string_view path = target.substr(0, target.find('?'));
  const bool needs_key = path.starts_with("/v1/") || (path == "/metrics" && access_.metrics_need_key);
  if (!needs_key || access_.api_key.empty() || bearer_matches(authorization, access_.api_key)) return std::nullopt;
  metrics_.rejected(Rejection::kUnauthorized);
  return unauthorized();
}

HttpReply Api::reject(Rejection why, ApiError error) {
  metrics_.rejected(why);
  HttpReply r = error_reply(error);
  if (error.status == 429) r.headers.emplace_back("Retry-After", std::to_string(retry_after_seconds_));
  if (why == Rejection::kDraining) r.close = true;
  return r;
}

Routed Api::completion(ApiKind kind, std::string_view body, CompletionJob::Clock::time_point arrival) {
  if (state_.draining.load())
    return {reject(Rejection::kDraining, {503, "server_error", "the server is shutting down", "", "draining"}), nullptr};
  auto parsed = parse_completion_request(body, kind);
  if (auto* err = std::get_if<ApiError>(&parsed)) return {reject(Rejection::kInvalid, *err), nullptr};
  CompletionRequest& req = std::get<CompletionRequest>(parsed);
  if (req.priority_sent && !access_.allow_client_priority) {
    ApiError e = ApiError::bad_request(
        "priority: this server does not take a scheduling priority from clients "
        "(start the worker with --allow-client-priority)",
        "priority");
    e.code = "priority_not_allowed";
    return {reject(Rejection::kInvalid, e), nullptr};
  }

  std::string adapter;
  if (!req.model.empty() && req.model != model_name_) {
    auto known = service_.adapters();
    if (std::find(known.begin(), known.end(), req.model) == known.end())
      return {reject(Rejection::kNotFound, {404, "not_found_error", "the model '" + req.model + "' does not exist",
                                            "model", "model_not_found"}),
              nullptr};
    adapter = req.model;
  }

  RequestParams params;
  if (kind == ApiKind::kChat) {
    params.prompt = service_.tokenize_chat(req.messages);
  } else if (req.prompt_is_tokens) {
    params.prompt = std::move(req.prompt_tokens);
    const int n_vocab = service_.vocab_size();
    for (size_t i = 0; i < params.prompt.size(); ++i) {
      if (params.prompt[i] >= n_vocab)
        return {reject(Rejection::kInvalid,
                       ApiError::bad_request("prompt[" + std::to_string(i) + "]: token id " +
                                                 std::to_string(params.prompt[i]) + " is outside the vocabulary (" +
                                                 std::to_string(n_vocab) + " tokens)",
                                             "prompt")),
                nullptr};
    }
  } else {
    params.prompt = service_.tokenize(req.prompt_text);
  }
  if (params.prompt.empty())
    return {reject(Rejection::kInvalid, ApiError::bad_request(
                                            kind == ApiKind::kChat ? "messages: the conversation has no tokens"
                                                                   : "prompt: must contain at least one token",
                                            kind == ApiKind::kChat ? "messages" : "prompt")),
            nullptr};

  const int max_context = service_.config().max_context;
  const int n_prompt = static_cast<int>(params.prompt.size());
  params.max_tokens = resolve_max_tokens(req, n_prompt, max_context);
  if (static_cast<long long>(n_prompt) + params.max_tokens > max_context) {
    ApiError e = ApiError::bad_request(
        "This model's maximum context length is " + std::to_string(max_context) + " tokens. However, you requested " +
            std::to_string(static_cast<long long>(n_prompt) + params.max_tokens) + " tokens (" +
            std::to_string(n_prompt) + " in the prompt, " + std::to_string(params.max_tokens) +
            " for the completion). Please reduce the prompt or max_tokens.",
        n_prompt >= max_context ? (kind == ApiKind::kChat ? "messages" : "prompt") : "max_tokens");
    e.code = "context_length_exceeded";
    return {reject(Rejection::kTooLong, e), nullptr};
  }
  params.sampling = req.sampling;
  params.stop = std::move(req.stop);
  params.ignore_eos = req.ignore_eos;
  params.priority = req.priority;
  params.adapter = std::move(adapter);

  const uint64_t n = next_id_.fetch_add(1);
  ResponseMeta meta{kind, (kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-") + id_prefix_ + "-" + std::to_string(n),
                    static_cast<int64_t>(std::time(nullptr)), req.model.empty() ? model_name_ : req.model};
  return {{}, std::make_unique<CompletionJob>(std::move(meta), std::move(params), req.stream, req.include_usage,
                                              metrics_, arrival)};
}

std::variant<uint64_t, HttpReply> Api::submit(CompletionJob& job, EventSink sink, const std::string& client) {
  const std::string adapter = job.params().adapter;
  {
    // The place is taken before the engine sees the request, so concurrent sessions of one
    // address cannot all pass the check at once.
    std::lock_guard lock(running_mutex_);
    int& mine = per_client_[client];
    if (max_requests_per_client_ > 0 && mine >= max_requests_per_client_) {
      if (mine == 0) per_client_.erase(client);
      return reject(Rejection::kTooManyRequests,
                    {429, "rate_limit_error",
                     "this client address already has " + std::to_string(max_requests_per_client_) +
                         " requests running or waiting (server.max_requests_per_client); retry later",
                     "", "too_many_requests"});
    }
    ++mine;
  }
  SubmitResult r;
  try {
    r = service_.submit(std::move(job.params()), std::move(sink));
  } catch (const std::exception& e) {
    release(client);
    return reject(Rejection::kEngineError, {503, "server_error", std::string("the engine failed: ") + e.what(), "",
                                            "engine_error"});
  }
  if (r.status != SubmitStatus::kAccepted) release(client);
  switch (r.status) {
    case SubmitStatus::kAccepted: {
      if (!adapter.empty()) metrics_.lora_request(adapter);
      std::lock_guard lock(running_mutex_);
      running_.emplace(r.id, client);
      return r.id;
    }
    case SubmitStatus::kQueueFull:
      return reject(Rejection::kQueueFull, {429, "rate_limit_error", "the request queue is full; retry later: " + r.message,
                                            "", "queue_full"});
    case SubmitStatus::kTooLong: {
      ApiError e = ApiError::bad_request(r.message, "max_tokens");
      e.code = "context_length_exceeded";
      return reject(Rejection::kTooLong, e);
    }
    case SubmitStatus::kUnknownAdapter:
      return reject(Rejection::kNotFound, {404, "not_found_error", r.message, "model", "model_not_found"});
    case SubmitStatus::kDraining:
      return reject(Rejection::kDraining, {503, "server_error", "the server is shutting down", "", "draining"});
    case SubmitStatus::kInvalid:
      return reject(Rejection::kInvalid, ApiError::bad_request(r.message, ""));
  }
  return reject(Rejection::kEngineError, {503, "server_error", "the engine refused the request: " + r.message, "",
                                          "engine_error"});
}

void Api::finished(uint64_t id) {
  std::string client;
  {
    std::lock_guard lock(running_mutex_);
    auto it = running_.find(id);
    if (it == running_.end()) return;
    client = std::move(it->second);
    running_.erase(it);
  }
  release(client);
}

void Api::release(const std::string& client) {
  std::lock_guard lock(running_mutex_);
  auto it = per_client_.find(client);
  if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
}

void Api::cancel_running() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(running_mutex_);
    for (const auto& [id, client] : running_) ids.push_back(id);
  }
  for (uint64_t id : ids) service_.cancel(id);
}

bool Api::routed_off_io(std::string_view method, std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return method == "POST" && (path == "/v1/completions" || path == "/v1/chat/completions");
}

void Api::start_parsing(int threads, int max_queued) {
  parse_pool_ = std::make_unique<net::thread_pool>(static_cast<size_t>(threads));
  max_queued_parses_ = max_queued;
}

bool Api::post_parse(std::function<void()> work) {
  if (queued_parses_.fetch_add(1) >= max_queued_parses_) {
    queued_parses_.fetch_sub(1);
    return false;
  }
  net::post(*parse_pool_, [this, work = std::move(work)] {
    work();
    queued_parses_.fetch_sub(1);
  });
  return true;
}

void Api::stop_parsing() {
  if (parse_pool_) parse_pool_->join();
}

HttpReply Api::parse_queue_full() {
  return reject(Rejection::kQueueFull,
                {429, "rate_limit_error",
                 "too many requests waiting to be parsed (server.max_queued_parses " +
                     std::to_string(max_queued_parses_) + "); retry later",
                 "", "parse_queue_full"});
}

HttpReply Api::too_many_connections(int limit) {
  return reject(Rejection::kTooManyConnections,
                {429, "rate_limit_error",
                 "this client address already has " + std::to_string(limit) +
                     " connections open (server.max_connections_per_client); reuse or close one, or retry later",
                 "", "too_many_connections"});
}

}  // namespace vigil
