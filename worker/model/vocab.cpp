// Byte-level BPE tokenizer following llama.cpp (llama-vocab.cpp): loading, special tokens, BPE
// merges. UTF-8 and the pre-tokenizer are in unicode.cpp, as llama.cpp keeps its unicode.cpp.
#include "model/vocab.h"

#include <algorithm>
#include <array>
#include <queue>
#include <stdexcept>

#include "model/gguf.h"
#include "model/unicode.h"

namespace vigil {
namespace {

// GPT-2's byte <-> code point map: printable Latin-1 bytes map to themselves, the other 68 bytes
// to U+0100.. in byte order, so every byte becomes a visible character of the vocabulary.
struct ByteMap {
  std::array<uint16_t, 256> to_cpt{};
  std::array<int16_t, 0x144> to_byte{};  // -1: not the image of a byte
  ByteMap() {
    to_byte.fill(-1);
    uint16_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cpt[b] = printable ? static_cast<uint16_t>(b) : next++;
      to_byte[to_cpt[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

// llama_decode_text: each code point of a token back to the byte it stands for; one outside
// GPT-2's map is spelled out the way llama.cpp does it.
std::string decode_byte_level(std::string_view text) {
  const ByteMap& bytes = byte_map();
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const uint32_t cpt = utf8_next_codepoint(text, i);
    if (cpt < bytes.to_byte.size() && bytes.to_byte[cpt] >= 0) {
      out.push_back(static_cast<char>(bytes.to_byte[cpt]));
      continue;
    }
    std::string utf8;
    utf8_append(cpt, utf8);
    static constexpr char kHex[] = "0123456789abcdef";
    out += "[UNK_BYTE_0x";
    for (char ch : utf8) {
      out += kHex[static_cast<uint8_t>(ch) >> 4];
      out += kHex[static_cast<uint8_t>(ch) & 15];
    }
    out.append(text);
    out += ']';
  }
  return out;
}

}  // namespace

Vocab Vocab::from_gguf(const GgufFile& file) {
  if (file.get_string("tokenizer.ggml.model") != "gpt2")
    file.fail("tokenizer.ggml.model '" + std::string(file.get_string("tokenizer.ggml.model")) +
              "' is not supported (only gpt2, byte-level BPE)");
  if (file.get_string("tokenizer.ggml.pre") != "smollm")
    file.fail("tokenizer.ggml.pre '" + std::string(file.get_string("tokenizer.ggml.pre")) +
              "' is not supported (only smollm)");

  Vocab v;
  const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty() || tokens.size() > (1u << 24))
    file.fail("tokenizer.ggml.tokens has " + std::to_string(tokens.size()) + " entries");
  const size_t n = tokens.size();
  std::vector<int32_t> types(n, 1);
  if (file.find("tokenizer.ggml.token_type")) {
    types = file.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != n)
      file.fail("tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                std::to_string(n) + " tokens");
  }

  // Texts llama.cpp treats as end of generation (its EOT/EOG lists and the FIM pad/repo/sep tokens
  // it adds to EOG) and forces to control type.
  static const std::array<std::string_view, 18> kEogTexts = {
      "<|endoftext|>", "<|im_end|>",      "<|eot_id|>",         "<|eom_id|>",  "<|end|>",    "<end_of_turn>",
      "<EOT>",         "<|end_of_text|>", "<end_of_utterance>", "<|fim_pad|>", "<fim-pad>",  "<PAD>",
      "<|fim_repo|>",  "<|repo_name|>",   "<fim-repo>",         "<REPO>",      "<reponame>", "<|file_sep|>"};

  v.tokens_.reserve(n);
  v.kinds_.resize(n);
  v.pieces_.resize(n);
  v.eog_.assign(n, false);
  v.token_ids_.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string_view text = tokens[id];
    v.tokens_.emplace_back(text);
    v.token_ids_.emplace(text, static_cast<int32_t>(id));  // a duplicate keeps its first id
    // GGUF token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
    static constexpr TokenKind kByType[] = {TokenKind::UNDEFINED, TokenKind::NORMAL,       TokenKind::UNKNOWN,
                                            TokenKind::CONTROL,   TokenKind::USER_DEFINED, TokenKind::UNUSED,
                                            TokenKind::BYTE};
    TokenKind kind = types[id] >= 1 && types[id] <= 6 ? kByType[types[id]] : TokenKind::UNDEFINED;
    if (std::find(kEogTexts.begin(), kEogTexts.end(), text) != kEogTexts.end()) {
      v.eog_[id] = true;
      if (kind != TokenKind::USER_DEFINED && kind != TokenKind::UNKNOWN) kind = TokenKind::CONTROL;
    }
    v.kinds_[id] = kind;

    std::string& piece = v.pieces_[id];
    if (kind == TokenKind::CONTROL || kind == TokenKind::UNKNOWN || kind == TokenKind::USER_DEFINED) {
      piece = text;
      if (!text.empty()) v.specials_.push_back({static_cast<int32_t>(id), kind == TokenKind::USER_DEFINED});
    } else if (kind == TokenKind::NORMAL) {
      piece = decode_byte_level(text);
    }
    // Unused, byte and undefined tokens render as nothing, as in llama.cpp's BPE token_to_piece.
  }
  std::stable_sort(v.specials_.begin(), v.specials_.end(), [&](const Special& a, const Special& b) {
    return v.tokens_[a.id].size() > v.tokens_[b.id].size();
  });

  const auto merges = file.get_string_array("tokenizer.ggml.merges");
  v.merge_ranks_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view line = merges[rank];
    if (line.size() < 3 || line.find(' ', 1) == std::string_view::npos)
      file.fail("tokenizer.ggml.merges[" + std::to_string(rank) + "] '" + std::string(line) +
                "' is not two tokens separated by a space");
    v.merge_ranks_.emplace(line, static_cast<int32_t>(rank));  // a duplicate keeps its first rank
  }

  auto special_id = [&](std::string_view key) -> int32_t {
    const uint64_t id = file.get_uint_or(key, UINT64_MAX);
    if (id == UINT64_MAX) return -1;
    if (id >= n)
      file.fail(std::string(key) + " " + std::to_string(id) + " is outside the " + std::to_string(n) +
                " tokens");
    return static_cast<int32_t>(id);
  };
  v.bos_ = special_id("tokenizer.ggml.bos_token_id");
  v.eos_ = special_id("tokenizer.ggml.eos_token_id");
  if (v.eos_ < 0) file.fail("tokenizer.ggml.eos_token_id not found");
  v.eog_[static_cast<size_t>(v.eos_)] = true;
  return v;
}

int32_t Vocab::find_token(std::string_view text) const {
  auto it = token_ids_.find(text);
  return it == token_ids_.end() ? -1 : it->second;
}

int32_t Vocab::merge_rank(std::string_view left, std::string_view right, std::string& scratch) const {
  scratch.assign(left);
  scratch += ' ';
  scratch += right;
  auto it = merge_ranks_.find(scratch);
  return it == merge_ranks_.end() ? -1 : it->second;
}

// llm_tokenizer_bpe_session::tokenize for one pre-tokenized word: repeatedly merge the adjacent
// pair with the lowest merge rank (leftmost on ties) until no listed pair remains.
void Vocab::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    size_t start, len;
    int prev, next;
  };
  struct Bigram {
    int32_t rank;
    int left, right;
    size_t len;  // left.len + right.len when queued; a merge since then makes it stale
  };
  auto later = [](const Bigram& a, const Bigram& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };

  std::vector<Symbol> symbols;
  for (size_t off = 0; off < word.size();) {
    static constexpr uint8_t kUtf8Len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    const size_t len = std::min<size_t>(word.size() - off, kUtf8Len[static_cast<uint8_t>(word[off]) >> 4]);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({off, len, index - 1, off + len == word.size() ? -1 : index + 1});
    off += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, decltype(later)> queue(later);
  std::string scratch;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const int32_t rank = merge_rank(word.substr(l.start, l.len), word.substr(r.start, r.len), scratch);
    if (rank >= 0) queue.push({rank, left, right, l.len + r.len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& l = symbols[static_cast<size_t>(top.left)];
    Symbol& r = symbols[static_cast<size_t>(top.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != top.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = top.left;
    try_pair(l.prev, top.left);
    try_pair(top.left, l.next);
  }

  for (const Symbol& s : symbols) {
    if (s.len == 0) continue;
    const std::string_view text = word.substr(s.start, s.len);
    if (const int32_t id = find_token(text); id >= 0) {
      out.push_back(id);
      continue;
    }
    // A merge result missing from the vocabulary: llama.cpp falls back to single-byte tokens.
    for (char ch : text) {
      if (const int32_t id = find_token(std::string_view(&ch, 1)); id >= 0) out.push_back(id);
    }
  }
}

// One fragment of plain text: decode code points, split them as the smollm pre-tokenizer does
// (each \p{N} alone, then the GPT-2 regex inside the pieces between), byte-encode, run BPE.
void Vocab::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  for (size_t i = 0; i < text.size();) cpts.push_back(utf8_next_codepoint(text, i));
  std::vector<CodepointSpan> words;
  pretokenize_smollm(cpts, words);

  const ByteMap& bytes = byte_map();
  std::string utf8;
  std::string encoded;
  for (const CodepointSpan& w : words) {
    utf8.clear();
    for (size_t i = w.begin; i < w.end; ++i) utf8_append(cpts[i], utf8);
    encoded.clear();
    for (char ch : utf8) utf8_append(bytes.to_cpt[static_cast<uint8_t>(ch)], encoded);
    bpe_word(encoded, out);
  }
}

std::vector<int32_t> Vocab::encode(std::string_view text, bool parse_special) const {
  // llama.cpp's tokenizer_st_partition: each special token in turn (longest first) cuts the
  // remaining plain-text fragments at its leftmost non-overlapping occurrences.
  struct Fragment {
    size_t off, len;
    int32_t token;  // -1: plain text
  };
  std::vector<Fragment> fragments{{0, text.size(), -1}};
  std::vector<Fragment> next;
  for (const Special& special : specials_) {
    if (!special.always && !parse_special) continue;
    const std::string& needle = tokens_[static_cast<size_t>(special.id)];
    if (text.find(needle) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.off;
      const size_t end = f.off + f.len;
      for (size_t m; (m = text.substr(0, end).find(needle, pos)) != std::string_view::npos;
           pos = m + needle.size()) {
        if (m > pos) next.push_back({pos, m - pos, -1});
        next.push_back({m, needle.size(), special.id});
      }
      if (pos < end) next.push_back({pos, end - pos, -1});
    }
    fragments.swap(next);
  }

  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else if (f.len > 0) {
      encode_text(text.substr(f.off, f.len), out);
    }
  }
  return out;
}

const std::string& Vocab::token_to_piece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size())
    throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary of " +
                            std::to_string(pieces_.size()));
  return pieces_[static_cast<size_t>(id)];
}

std::string Vocab::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id);
  return out;
}

bool Vocab::is_eog(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < eog_.size() && eog_[static_cast<size_t>(id)];
}

bool Vocab::is_control(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < kinds_.size() &&
         kinds_[static_cast<size_t>(id)] == TokenKind::CONTROL;
}

}  // namespace vigil
