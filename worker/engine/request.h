// What a client asks the engine for, and the events the engine sends back while serving it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sequence_output.h"

namespace vigil {

struct RequestParams {
  std::vector<int32_t> prompt;      // token ids, already templated and tokenized
  SamplingParams sampling;
  int max_tokens = 16;
  std::vector<std::string> stop;    // stop strings; text ends before the first one
  bool ignore_eos = false;
  int priority = 0;                 // lower runs first under the priority policy (vLLM's rule)
  std::string adapter;              // LoRA adapter name; empty for the base model
};

// One step of progress for one request. Sent on the engine thread: a sink must not block.
struct RequestEvent {
  std::string text;                 // new text: whole UTF-8 characters, stop strings removed
  std::vector<int32_t> tokens;      // token ids generated since the last event
  FinishReason finish = FinishReason::kNone;  // set on the last event of the request
  std::string error;                // with kError: what went wrong
  int prompt_tokens = 0;
  int completion_tokens = 0;        // generated so far
  double queue_seconds = -1;        // on the first event only: submit to admission
};
using EventSink = std::function<void(const RequestEvent&)>;

}  // namespace vigil
