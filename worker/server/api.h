// Routes HTTP requests to the OpenAI API, health, readiness and metrics; knows nothing of sockets.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "server/api_access.h"
#include "server/completion_job.h"
#include "server/model_service.h"
#include "server/serve_config.h"
#include "server/server_state.h"
#include "server/worker_metrics.h"

namespace vigil {

// A complete answer: the session serializes it as an HTTP/1.1 response.
struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra fields (Allow, Retry-After)
  bool close = false;  // end the connection after it (draining, unreadable input)
};

// Either a reply now, or a completion to submit to the engine.
struct Routed {
  HttpReply reply;
  std::unique_ptr<CompletionJob> job;
};

HttpReply error_reply(const ApiError& error);

class Api {
 public:
  Api(ModelService& service, WorkerMetrics& metrics, ServerState& state, std::string model_name);

  // `authorization`: the request's Authorization header value, empty when absent.
  Routed route(std::string_view method, std::string_view target, std::string_view authorization,
               std::string_view body, CompletionJob::Clock::time_point arrival);
  // The 401 (counted) when `target` needs the API key and `authorization` does not carry it; read
  // from the request head, before any body.
  std::optional<HttpReply> check_key(std::string_view target, std::string_view authorization);
  // Submits a routed job for `client` (its address key). Accepted: the engine's id. Refused (the
  // engine's queue, or the client's share of it): the error reply to send instead.
  std::variant<uint64_t, HttpReply> submit(CompletionJob& job, EventSink sink, const std::string& client);
  void cancel(uint64_t id) { service_.cancel(id); }
  // The engine's last event for `id` reached its session.
  void finished(uint64_t id);
  // The drain grace is over: every accepted request is cancelled, so each client gets its error
  // event (finish reason and error object) from the engine's cancellation rather than a silent close.
  void cancel_running();

  // Completions (JSON, chat template, tokenizer: up to max_body_bytes each) are routed on parse
  // threads of their own, so a stream of large prompts never delays /health on an I/O thread.
  static bool routed_off_io(std::string_view method, std::string_view target);
  void start_parsing(int threads, int max_queued);
  // Runs `work` on a parse thread; false (nothing run) when max_queued are already waiting there.
  bool post_parse(std::function<void()> work);
  // Joins the parse threads; called once the I/O threads have stopped, before they are destroyed.
  void stop_parsing();
  // The 429 for a completion refused because the parse threads' queue was full.
  HttpReply parse_queue_full();
  // The 429 for a request on a connection past server.max_connections_per_client (`limit`).
  HttpReply too_many_connections(int limit);

  void set_retry_after(int seconds) { retry_after_seconds_ = seconds; }
  void set_access(ApiAccess access) { access_ = std::move(access); }
  void set_max_requests_per_client(int limit) { max_requests_per_client_ = limit; }

 private:
  Routed completion(ApiKind kind, std::string_view body, CompletionJob::Clock::time_point arrival);
  HttpReply reject(Rejection why, ApiError error);
  // Gives back a place of `client`'s share of the engine.
  void release(const std::string& client);

  ModelService& service_;
  WorkerMetrics& metrics_;
  ServerState& state_;
  std::string model_name_;
  int64_t created_;  // when the model was loaded, for /v1/models
  int retry_after_seconds_ = 1;
  ApiAccess access_;
  std::string id_prefix_;  // random per process: response ids never repeat across workers or restarts
  std::atomic<uint64_t> next_id_{1};
  std::unique_ptr<boost::asio::thread_pool> parse_pool_;
  int max_queued_parses_ = 0;
  std::atomic<int> queued_parses_{0};  // posted to the parse threads and not yet finished
  int max_requests_per_client_ = 0;
  std::mutex running_mutex_;  // sessions on every I/O thread add and remove
  std::map<uint64_t, std::string> running_;       // engine id -> client address key
  std::unordered_map<std::string, int> per_client_;  // requests in the engine per address (> 0 only)
};

}  // namespace vigil
