// Generates one sequence end to end (prefill in chunks, then decode): the CLI's engine.
#include "engine/generator.h"

#include <chrono>
#include <stdexcept>


namespace vigil {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

Generator::Generator(ForwardBackend& backend, const BackendShape& shape, const LlamaModel& model,
                     KvBlockAllocator& blocks, const Vocab& vocab)
    : backend_(backend), shape_(shape), model_(model), blocks_(blocks), vocab_(vocab) {
  batch_.reserve(static_cast<size_t>(shape.max_batch));
  history_.reserve(static_cast<size_t>(shape.max_positions));
}

GenerateResult Generator::generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                   const std::function<bool(std::string_view)>& on_text) {
  if (prompt.empty()) throw std::invalid_argument("prompt: must contain at least one token");
  if (options.max_tokens < 1) throw std::invalid_argument("max_tokens: must be at least 1");
  const size_t total = prompt.size() + static_cast<size_t>(options.max_tokens);
  if (total > static_cast<size_t>(shape_.max_positions))
    throw std::invalid_argument("prompt (" + std::to_string(prompt.size()) + " tokens) + max_tokens (" +
                                std::to_string(options.max_tokens) + ") exceeds the context of " +
                                std::to_string(shape_.max_positions));

  KvSequence seq;
  // The sequence gives its blocks back however generation ends.
  struct Release {
    KvBlockAllocator& blocks;
    KvSequence& seq;
    ~Release() { blocks.release(seq); }
  } release{blocks_, seq};
  if (!blocks_.reserve(seq, static_cast<int32_t>(total), shape_.kv_block_size))
    throw std::runtime_error("kv cache: not enough free blocks for " + std::to_string(total) + " positions");

  Sampler sampler(options.sampling, model_.hparams().n_vocab);
  SequenceOutput output(vocab_, options.stop, options.max_tokens, options.ignore_eos);
  GenerateResult result;
  result.tokens.reserve(static_cast<size_t>(options.max_tokens));
  history_.assign(prompt.begin(), prompt.end());
  const auto t0 = Clock::now();

  // Prefill in chunks of the context's batch size; only the prompt's last token needs logits.
  for (size_t start = 0; start < prompt.size(); start += static_cast<size_t>(shape_.max_batch)) {
    const size_t end = std::min(prompt.size(), start + static_cast<size_t>(shape_.max_batch));
    batch_.clear();
    for (size_t i = start; i < end; ++i)
      batch_.push_back(
          {.token = prompt[i], .pos = static_cast<int32_t>(i), .seq = &seq, .want_logits = i + 1 == prompt.size()});
    backend_.forward(batch_);
  }
  seq.n_past = static_cast<int32_t>(prompt.size());
  result.prefill_seconds = seconds_since(t0);
  const auto t1 = Clock::now();

  while (result.finish == FinishReason::kNone) {
    if (!result.tokens.empty()) {
      batch_.assign(1, {.token = result.tokens.back(), .pos = seq.n_past, .seq = &seq, .want_logits = true,
                        .generated = true});
      backend_.forward(batch_);
      ++seq.n_past;
    }
    const int32_t token = sampler.sample(backend_.logits(0), history_);
    result.tokens.push_back(token);
    history_.push_back(token);
    std::string text;
    result.finish = output.push(token, text);
    if (!text.empty() && !on_text(text)) result.finish = FinishReason::kCancelled;
  }
  if (result.finish != FinishReason::kCancelled) {
    const std::string tail = output.flush();
    if (!tail.empty()) on_text(tail);
  }
  result.decode_seconds = seconds_since(t1);
  return result;
}

}  // namespace vigil
