// UTF-8 and the pre-tokenizer, following llama.cpp's unicode.cpp.
#include "model/unicode.h"

#include <algorithm>
#include <iterator>

#include "model/unicode_tables.h"

namespace vigil {
namespace {

constexpr uint32_t kReplacement = 0xFFFD;
constexpr uint32_t kMaxCodepoint = 0x10FFFF;

uint8_t byte_at(std::string_view s, size_t i) { return static_cast<uint8_t>(s[i]); }

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

// The GPT-2 regex  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// over the code points [ini, end), as llama.cpp's unicode_regex_split_custom_gpt2 runs it.
void split_gpt2(const std::vector<uint32_t>& cpts, const std::vector<CharClass>& cls, size_t ini, size_t end,
                std::vector<CodepointSpan>& words) {
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

// llama.cpp's unicode_cpt_from_utf8 with the recovery of unicode_cpts_from_utf8: a bad sequence
// yields U+FFFD and skips one byte. Overlong forms and surrogates are decoded as llama.cpp
// decodes them. One deliberate difference: a 4-byte form above U+10FFFF is a bad sequence here,
// where llama.cpp later throws from unicode_cpt_to_utf8 and aborts the process.
uint32_t utf8_next_codepoint(std::string_view s, size_t& i) {
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
void utf8_append(uint32_t cpt, std::string& out) {
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

CharClass classify_codepoint(uint32_t cpt) {
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

void pretokenize_smollm(const std::vector<uint32_t>& cpts, std::vector<CodepointSpan>& words) {
  std::vector<CharClass> cls(cpts.size());
  std::transform(cpts.begin(), cpts.end(), cls.begin(), classify_codepoint);
  for (size_t chunk = 0; chunk < cpts.size();) {
    size_t end = chunk + 1;
    if (cls[chunk] != CharClass::NUMBER) {
      while (end < cpts.size() && cls[end] != CharClass::NUMBER) ++end;
    }
    split_gpt2(cpts, cls, chunk, end, words);
    chunk = end;
  }
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
