// Generates one sequence end to end (prefill in chunks, then decode): the CLI's engine.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/forward_backend.h"
#include "backend/kv_blocks.h"
#include "engine/sampler.h"
#include "engine/sequence_output.h"
#include "model/llama_model.h"

namespace vigil {

class Vocab;

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 128;
  std::vector<std::string> stop;  // stop strings; the output ends before the first one
  bool ignore_eos = false;        // keep going past end-of-generation tokens (benchmarks), as the API's ignore_eos
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (without the prompt)
  FinishReason finish = FinishReason::kNone;  // kStop (end token or stop string), kLength, kCancelled
  double prefill_seconds = 0;   // prompt processing, until the first token's logits
  double decode_seconds = 0;    // all later tokens
};

class Generator {
 public:
  // Runs `backend` (built with `shape`) one sequence at a time, its cache numbered by `blocks`; the
  // sequence's blocks are returned at the end.
  Generator(ForwardBackend& backend, const BackendShape& shape, const LlamaModel& model, KvBlockAllocator& blocks,
            const Vocab& vocab);

  // Streams text pieces (valid UTF-8, stop strings removed) to on_text; on_text returning false
  // cancels. Throws std::invalid_argument when prompt + max_tokens exceed the context.
  GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                          const std::function<bool(std::string_view)>& on_text);

 private:
  ForwardBackend& backend_;
  BackendShape shape_;
  const LlamaModel& model_;
  KvBlockAllocator& blocks_;
  const Vocab& vocab_;
  std::vector<BatchToken> batch_;
  std::vector<int32_t> history_;
};

}  // namespace vigil
