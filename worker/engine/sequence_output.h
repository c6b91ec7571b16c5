// One sequence's output as its tokens arrive: end of generation, stop strings, whole UTF-8
// characters and the token limit, decided once for the serving engine and the CLI's generator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/stop_matcher.h"
#include "model/unicode.h"

namespace vigil {

class Vocab;

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "cancelled", "error"

class SequenceOutput {
 public:
  // `stop`: stop strings, the text ends before the first one; `ignore_eos`: end-of-generation
  // tokens do not end it (benchmarks).
  SequenceOutput(const Vocab& vocab, std::vector<std::string> stop, int max_tokens, bool ignore_eos);

  // One generated token. Appends to `text` what is now safe to emit (whole characters, never a
  // stop string or what may begin one) and says whether the sequence ends here: kStop at an
  // end-of-generation token or a stop string, kLength at the max_tokens-th token, else kNone.
  FinishReason push(int32_t token, std::string& text);
  // At an end by kStop or kLength: the text still held back (empty after a stop string).
  std::string flush();
  int generated() const { return generated_; }

 private:
  const Vocab& vocab_;
  StopMatcher stops_;
  Utf8Streamer utf8_;
  int max_tokens_;
  bool ignore_eos_;
  int generated_ = 0;
};

}  // namespace vigil
