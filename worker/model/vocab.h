// The model's tokenizer: byte-level BPE (GPT-2 style) with llama.cpp's `smollm` pre-tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vigil {

class GgufFile;

// Ids match llama.cpp's llama_tokenize(add_special=false) on the same GGUF; the reference corpus
// in tests/fixtures/tokenizer_corpus.json checks that.
class Vocab {
 public:
  // Reads tokenizer.ggml.{model,pre,tokens,token_type,merges,bos/eos_token_id}; throws GgufError
  // naming the problem when they are missing, inconsistent, or of a kind we do not implement.
  static Vocab from_gguf(const GgufFile& file);

  // Never adds BOS (the model's add_bos is false). With parse_special, the text of control
  // tokens in the input becomes their ids (llama.cpp's parse_special=true); user-defined tokens
  // are matched in both modes, as llama.cpp does. Any bytes are accepted: invalid UTF-8 is
  // tokenized as U+FFFD per bad byte, like llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;

  // The bytes of one token; control, unknown and user-defined tokens render as their text.
  // Throws std::out_of_range for an id outside the vocabulary.
  const std::string& token_to_piece(int32_t id) const;
  // Concatenated pieces (llama_detokenize with unparse_special=true); may be invalid UTF-8.
  std::string decode(std::span<const int32_t> ids) const;

  // End of generation: eos, <|endoftext|>, and the other tokens llama.cpp counts as EOG.
  bool is_eog(int32_t id) const;
  bool is_control(int32_t id) const;
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  size_t size() const { return tokens_.size(); }

 private:
  // Hash that lets unordered_map<std::string, ...> be searched with a string_view.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  enum class TokenKind : uint8_t { NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE, UNDEFINED };

  struct Special {
    int32_t id;
    bool always;  // user-defined: split out even without parse_special
  };

  Vocab() = default;
  void bpe_word(std::string_view encoded_word, std::vector<int32_t>& out) const;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  int32_t find_token(std::string_view text) const;
  int32_t merge_rank(std::string_view left, std::string_view right, std::string& scratch) const;

  std::vector<std::string> tokens_;  // [n_vocab] GPT-2 byte-encoded text, as stored in the GGUF
  std::vector<TokenKind> kinds_;     // [n_vocab]
  std::vector<std::string> pieces_;  // [n_vocab] decoded bytes (special tokens: their text)
  std::vector<bool> eog_;            // [n_vocab]
  StringMap token_ids_;              // encoded text -> id
  StringMap merge_ranks_;            // "left right" (a GGUF merges line) -> rank
  std::vector<Special> specials_;    // longest text first, the order llama.cpp matches them in
  int32_t bos_ = -1;
  int32_t eos_ = -1;
};

}  // namespace vigil
