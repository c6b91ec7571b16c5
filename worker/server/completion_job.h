// One accepted completion request: turns the engine's events into the OpenAI answer (a body, or
// SSE chunks) and records the request's latency metrics.
#pragma once

#include <chrono>
#include <string>

#include "engine/request.h"
#include "server/openai_response.h"
#include "server/worker_metrics.h"

namespace vigil {

class CompletionJob {
 public:
  using Clock = std::chrono::steady_clock;

  CompletionJob(ResponseMeta meta, RequestParams params, bool stream, bool include_usage,
                WorkerMetrics& metrics, Clock::time_point arrival);

  RequestParams& params() { return params_; }
  bool stream() const { return stream_; }
  bool finished() const { return finished_; }

  // Feeds one engine event. Streaming: returns the SSE events to send (possibly none; the last
  // call ends with [DONE]). Not streaming: returns nothing until the finish, then the whole body.
  std::string on_event(const RequestEvent& event);
  // Not streaming, after the finish: 200, or 503 when the engine failed or cut the request.
  int status() const { return status_; }

 private:
  std::string finish(const RequestEvent& event);

  ResponseMeta meta_;
  RequestParams params_;
  bool stream_;
  bool include_usage_;
  WorkerMetrics& metrics_;
  Clock::time_point arrival_;
  Clock::time_point last_token_;
  bool first_event_ = true;
  bool first_chunk_ = true;
  bool saw_token_ = false;
  bool finished_ = false;
  int status_ = 200;
  std::string text_;  // not streaming: the whole completion so far
};

}  // namespace vigil
