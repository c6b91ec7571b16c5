// One sequence's output as its tokens arrive (see sequence_output.h).
#include "engine/sequence_output.h"

#include "model/vocab.h"

namespace vigil {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

SequenceOutput::SequenceOutput(const Vocab& vocab, std::vector<std::string> stop, int max_tokens, bool ignore_eos)
    : vocab_(vocab), stops_(std::move(stop)), max_tokens_(max_tokens), ignore_eos_(ignore_eos) {}

FinishReason SequenceOutput::push(int32_t token, std::string& text) {
  ++generated_;
  if (vocab_.is_eog(token) && !ignore_eos_) return FinishReason::kStop;
  text += stops_.push(utf8_.push(vocab_.token_to_piece(token)));
  if (stops_.stopped()) return FinishReason::kStop;
  if (generated_ >= max_tokens_) return FinishReason::kLength;
  return FinishReason::kNone;
}

std::string SequenceOutput::flush() {
  std::string tail = stops_.push(utf8_.flush());
  tail += stops_.flush();
  return tail;
}

}  // namespace vigil
