// Event-to-response translation. Timing is taken when the event reaches the connection's strand,
// which is what the client experiences, not when the engine produced it.
#include "server/completion_job.h"

#include <utility>

namespace vigil {
namespace {

double seconds(CompletionJob::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

CompletionJob::CompletionJob(ResponseMeta meta, RequestParams params, bool stream, bool include_usage,
                             WorkerMetrics& metrics, Clock::time_point arrival)
    : meta_(std::move(meta)),
      params_(std::move(params)),
      stream_(stream),
      include_usage_(include_usage),
      metrics_(metrics),
      arrival_(arrival),
      last_token_(arrival) {}

std::string CompletionJob::on_event(const RequestEvent& event) {
  const auto now = Clock::now();
  if (first_event_ && event.queue_seconds >= 0) metrics_.request_queued(event.queue_seconds);
  first_event_ = false;
  if (!event.tokens.empty()) {
    if (!saw_token_) {
      metrics_.first_token(seconds(now - arrival_));
    } else {
      metrics_.tokens_after(seconds(now - last_token_), event.tokens.size());
    }
    saw_token_ = true;
    last_token_ = now;
  }
  if (event.finish != FinishReason::kNone) return finish(event);
  if (!stream_) {
    text_ += event.text;
    return "";
  }
  // A chat stream opens with the role even before any text, as OpenAI's does.
  if (event.text.empty() && !(first_chunk_ && meta_.kind == ApiKind::kChat)) return "";
  std::string out = stream_chunk(meta_, event.text, "", first_chunk_, include_usage_);
  first_chunk_ = false;
  return out;
}

std::string CompletionJob::finish(const RequestEvent& event) {
  finished_ = true;
  metrics_.request_finished(event.finish, event.prompt_tokens, event.completion_tokens, seconds(Clock::now() - arrival_));
  const Usage usage{event.prompt_tokens, event.completion_tokens};
  const bool ok = event.finish == FinishReason::kStop || event.finish == FinishReason::kLength;
  ApiError error{503, "server_error", "", "", ""};
  if (event.finish == FinishReason::kError) {
    error.message = "the engine failed on this request: " + event.error;
    error.code = "engine_error";
  } else {
    error.message = "the request was cancelled before it finished (server shutting down)";
    error.code = "cancelled";
  }
  if (!stream_) {
    if (!ok) {
      status_ = error.status;
      return error_body(error);
    }
    text_ += event.text;
    return completion_body(meta_, text_, finish_reason_name(event.finish), usage);
  }
  std::string out;
  if (ok) {
    out = stream_chunk(meta_, event.text, finish_reason_name(event.finish), first_chunk_, include_usage_);
    if (include_usage_) out += stream_usage_chunk(meta_, usage);
  } else {
    if (!event.text.empty()) out = stream_chunk(meta_, event.text, "", first_chunk_, include_usage_);
    out += stream_error(error);
  }
  first_chunk_ = false;
  out += kStreamDone;
  return out;
}

}  // namespace vigil
