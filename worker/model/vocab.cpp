// Byte-level BPE tokenizer following llama.cpp (llama-vocab.cpp, unicode.cpp) for the smollm pre-tokenizer.
#include "model/vocab.h"

#include <algorithm>
#include <array>
#include <queue>
#include <stdexcept>

#include "model/gguf.h"
#include "model/unicode_tables.h"

namespace vigil {
namespace {

constexpr uint32_t kReplacement = 0xFFFD;
constexpr uint32_t kMaxCodepoint = 0x10FFFF;

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

uint8_t byte_at(std::string_view s, size_t i) { return static_cast<uint8_t>(s[i]); }

// llama.cpp's unicode_cpt_from_utf8 with the recovery of unicode_cpts_from_utf8: a bad sequence
// yields U+FFFD and skips one byte. Overlong forms and surrogates are decoded as llama.cpp
// decodes them. One deliberate difference: a 4-byte form above U+10FFFF is a bad sequence here,
// where llama.cpp later throws from unicode_cpt_to_utf8 and aborts the process.
uint32_t next_codepoint(std::string_view s, size_t& i) {
  const uint8_t b0 = byte_at(s, i);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const size_t n = (b0 & 0x40) == 0   ? 0
                   : (b0 & 0x20) == 0 ? 2
                   : (b0 & 0x10) == 0 ? 3
                   : (b0 & 0x08) == 0 ? 4
                                      : 0;
  if (n == 0 || i + n > s.size()) {
    ++i;
    return kReplacement;
  }
  uint32_t cpt = b0 & (0x7Fu >> n);
  for (size_t k = 1; k < n; ++k) {
    const uint8_t c = byte_at(s, i + k);
    if ((c & 0xC0) != 0x80) {
      ++i;
      return kReplacement;
    }
    cpt = (cpt << 6) | (c & 0x3Fu);
  }
  if (cpt > kMaxCodepoint) {
    ++i;
    return kReplacement;
  }
  i += n;
  return cpt;
}

// No surrogate check, as in llama.cpp: a decoded surrogate goes back out as its 3 bytes.
void append_utf8(uint32_t cpt, std::string& out) {
  auto put = [&](uint32_t v) { out.push_back(static_cast<char>(v)); };
  if (cpt < 0x80) {
    put(cpt);
  } else if (cpt < 0x800) {
    put(0xC0 | (cpt >> 6));
    put(0x80 | (cpt & 0x3F));
  } else if (cpt < 0x10000) {
    put(0xE0 | (cpt >> 12));
    put(0x80 | ((cpt >> 6) & 0x3F));
    put(0x80 | (cpt & 0x3F));
  } else {
    put(0xF0 | (cpt >> 18));
    put(0x80 | ((cpt >> 12) & 0x3F));
    put(0x80 | ((cpt >> 6) & 0x3F));
    put(0x80 | (cpt & 0x3F));
  }
}

// llama_decode_text: each code point of a token back to the byte it stands for; one outside
// GPT-2's map is spelled out the way llama.cpp does it.
std::string decode_byte_level(std::string_view text) {
  const ByteMap& bytes = byte_map();
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const uint32_t cpt = next_codepoint(text, i);
    if (cpt < bytes.to_byte.size() && bytes.to_byte[cpt] >= 0) {
      out.push_back(static_cast<char>(bytes.to_byte[cpt]));
      continue;
    }
    std::string utf8;
    append_utf8(cpt, utf8);
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

// What the pre-tokenizer's regexes distinguish. NONE stands for "outside the current chunk",
// where llama.cpp's lookahead sees empty flags.
enum class CharClass : uint8_t { NONE, OTHER, LETTER, NUMBER, SPACE };

bool in_ranges(std::span<const unicode_tables::Range> ranges, uint32_t cpt) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cpt,
                             [](uint32_t c, const unicode_tables::Range& r) { return c < r.first; });
  return it != ranges.begin() && cpt <= std::prev(it)->last;
}

// White_Space as llama.cpp's gen-unicode-data.py lists it (not the Unicode category Z).
bool is_whitespace(uint32_t cpt) {
  return (cpt >= 0x09 && cpt <= 0x0D) || cpt == 0x20 || cpt == 0x85 || cpt == 0xA0 || cpt == 0x1680 ||
         (cpt >= 0x2000 && cpt <= 0x200A) || cpt == 0x2028 || cpt == 0x2029 || cpt == 0x202F ||
         cpt == 0x205F || cpt == 0x3000;
}

CharClass classify(uint32_t cpt) {
  if (cpt < 0x80) {
    if (is_whitespace(cpt)) return CharClass::SPACE;
    if ((cpt | 0x20) >= 'a' && (cpt | 0x20) <= 'z') return CharClass::LETTER;
    if (cpt >= '0' && cpt <= '9') return CharClass::NUMBER;
    return CharClass::OTHER;
  }
  if (is_whitespace(cpt)) return CharClass::SPACE;
  if (in_ranges(unicode_tables::letters, cpt)) return CharClass::LETTER;
  if (in_ranges(unicode_tables::numbers, cpt)) return CharClass::NUMBER;
  return CharClass::OTHER;
}

struct Span {
  size_t begin, end;  // code point indices
};

// The GPT-2 regex  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// over the code points [ini, end), as llama.cpp's unicode_regex_split_custom_gpt2 runs it.
void split_gpt2(const std::vector<uint32_t>& cpts, const std::vector<CharClass>& cls, size_t ini, size_t end,
                std::vector<Span>& words) {
  auto class_at = [&](size_t p) { return p < end ? cls[p] : CharClass::NONE; };
  size_t prev = ini;
  auto add = [&](size_t e) {
    words.push_back({prev, e});
    prev = e;
  };
  for (size_t pos = ini; pos < end;) {
    const uint32_t c = cpts[pos];
    if (c == '\'' && pos + 1 < end) {
      const uint32_t n1 = cpts[pos + 1];
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        add(pos += 2);
        continue;
      }
      if (pos + 2 < end) {
        const uint32_t n2 = cpts[pos + 2];
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          add(pos += 3);
          continue;
        }
      }
    }
    // One leading ASCII space joins a following run of letters, numbers or other symbols.
    CharClass run = c == ' ' ? class_at(pos + 1) : cls[pos];
    if (run == CharClass::LETTER || run == CharClass::NUMBER || run == CharClass::OTHER) {
      pos += (c == ' ');
      while (class_at(pos) == run) ++pos;
      add(pos);
      continue;
    }
    // Here cls[pos] is SPACE. \s+(?!\S): a run followed by more text leaves its last space to
    // prefix the next word.
    size_t n_space = 0;
    while (class_at(pos + n_space) == CharClass::SPACE) ++n_space;
    pos += (n_space > 1 && pos + n_space < end) ? n_space - 1 : n_space;
    add(pos);
  }
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
    const size_t len = std::min<size_t>(word.size() - off, kUtf8Len[byte_at(word, off) >> 4]);
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
  for (size_t i = 0; i < text.size();) cpts.push_back(next_codepoint(text, i));
  std::vector<CharClass> cls(cpts.size());
  std::transform(cpts.begin(), cpts.end(), cls.begin(), classify);

  std::vector<Span> words;
  for (size_t chunk = 0; chunk < cpts.size();) {
    size_t end = chunk + 1;
    if (cls[chunk] != CharClass::NUMBER) {
      while (end < cpts.size() && cls[end] != CharClass::NUMBER) ++end;
    }
    split_gpt2(cpts, cls, chunk, end, words);
    chunk = end;
  }

  const ByteMap& bytes = byte_map();
  std::string utf8;
  std::string encoded;
  for (const Span& w : words) {
    utf8.clear();
    for (size_t i = w.begin; i < w.end; ++i) append_utf8(cpts[i], utf8);
    encoded.clear();
    for (char ch : utf8) append_utf8(bytes.to_cpt[static_cast<uint8_t>(ch)], encoded);
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

std::string Utf8Streamer::push(std::string_view piece) {
  pending_.append(piece);
  // Look back over at most 3 continuation bytes for the lead byte of the last sequence.
  size_t hold = 0;
  for (size_t k = 1; k <= std::min<size_t>(3, pending_.size()); ++k) {
    const uint8_t b = byte_at(pending_, pending_.size() - k);
    if ((b & 0xC0) == 0x80) continue;
    const size_t need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (need > k) hold = k;
    break;
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string Utf8Streamer::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

std::string with_replacement_characters(std::string_view bytes) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t b = byte_at(bytes, i);
    // Length and the allowed range of the second byte (the ranges exclude overlong forms,
    // surrogates and code points past U+10FFFF), from the lead byte.
    size_t need = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0x80) need = 1;
    else if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) need = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) need = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    size_t n = need ? 1 : 0;
    while (n && n < need && i + n < bytes.size()) {
      const uint8_t c = byte_at(bytes, i + n);
      if (c < (n == 1 ? lo : 0x80) || c > (n == 1 ? hi : 0xBF)) break;
      ++n;
    }
    // A complete character is copied; the longest prefix of one that breaks off (or a byte that
    // starts none) is one U+FFFD, and the next byte starts afresh: the Unicode "maximal subpart"
    // practice, which the server's JSON encoder follows too.
    if (need && n == need) out.append(bytes.substr(i, n));
    else out += kReplacement;
    i += n ? n : 1;
  }
  return out;
}

}  // namespace vigil
