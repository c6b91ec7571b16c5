// UTF-8 and the `smollm` pre-tokenizer, apart from the vocabulary as llama.cpp keeps unicode.cpp
// apart from llama-vocab.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vigil {

// The next code point of `s` from byte `i`, advancing `i` (llama.cpp's unicode_cpt_from_utf8,
// recovering as unicode_cpts_from_utf8 does: a bad sequence yields U+FFFD and skips one byte).
uint32_t utf8_next_codepoint(std::string_view s, size_t& i);
void utf8_append(uint32_t cpt, std::string& out);

// What the pre-tokenizer's regexes distinguish. NONE stands for "outside the current chunk",
// where llama.cpp's lookahead sees empty flags.
enum class CharClass : uint8_t { NONE, OTHER, LETTER, NUMBER, SPACE };
CharClass classify_codepoint(uint32_t cpt);

struct CodepointSpan {
  size_t begin, end;  // code point indices
};

// llama.cpp's `smollm` pre-tokenizer: each \p{N} alone, then the GPT-2 regex inside the pieces
// between. Appends the words of `cpts` to `words`.
void pretokenize_smollm(const std::vector<uint32_t>& cpts, std::vector<CodepointSpan>& words);

// Holds back an incomplete UTF-8 sequence at the end of a piece until the next piece completes
// it, so streamed text (terminal, SSE) never splits a character. Bytes that can never become
// valid UTF-8 pass through unchanged: the concatenated output always equals the input.
class Utf8Streamer {
 public:
  std::string push(std::string_view piece);
  // Whatever is still held (an incomplete sequence at the end of the stream).
  std::string flush();

 private:
  std::string pending_;
};

// `bytes` as valid UTF-8: every ill-formed sequence (a stray continuation byte, a bad lead byte, a
// sequence cut short, an overlong or surrogate encoding) becomes one U+FFFD, as the server's JSON
// encoder writes it. For text printed to a terminal, e.g. a generation cut mid-character.
std::string with_replacement_characters(std::string_view bytes);

}  // namespace vigil
