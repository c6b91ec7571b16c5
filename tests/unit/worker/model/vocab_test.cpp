// Tokenizer tests: llama.cpp's ids and text on the reference corpus, UTF-8 streaming, robustness.
#include "model/unicode.h"
#include "model/vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "worker/gguf_builder.h"

namespace vigil {
namespace {

using nlohmann::json;

std::string base64_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) continue;  // '=' padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// Printable form of a corpus string for failure messages.
std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0x20 && b < 0x7F && c != '\\') {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

// Strict UTF-8 check (no overlong forms, surrogates or values above U+10FFFF).
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const size_t n = b < 0x80                 ? 1
                     : b >= 0xC2 && b <= 0xDF ? 2
                     : b >= 0xE0 && b <= 0xEF ? 3
                     : b >= 0xF0 && b <= 0xF4 ? 4
                                              : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cpt = n == 1 ? b : b & (0x7Fu >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cpt = (cpt << 6) | (c & 0x3Fu);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cpt < kMin[n] || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

const json& corpus() {
  static const json doc = [] {
    std::ifstream in(VIGIL_SOURCE_DIR "/tests/fixtures/tokenizer_corpus.json");
    return json::parse(in);
  }();
  return doc;
}

const Vocab& model_vocab() {
  static const Vocab vocab = Vocab::from_gguf(GgufFile::open(VIGIL_MODEL_PATH));
  return vocab;
}

// SmolLM2 has no token for some bytes (0x04 0x06 0x13 0x14 0x16 0x1d, and bytes like 0xf2 that
// only start rare code points): llama.cpp's byte fallback finds nothing for them and drops them,
// and so do we. This is `s` without them.
std::string without_tokenless_bytes(std::string_view s) {
  static const std::array<bool, 256> has_token = [] {
    std::array<bool, 256> out{};
    const Vocab& v = model_vocab();
    for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id) {
      const std::string& piece = v.token_to_piece(id);
      if (piece.size() == 1) out[static_cast<uint8_t>(piece[0])] = true;
    }
    return out;
  }();
  std::string out;
  for (char c : s)
    if (has_token[static_cast<uint8_t>(c)]) out += c;
  return out;
}

class VocabReference : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(VIGIL_MODEL_PATH))
      GTEST_FAIL() << VIGIL_MODEL_PATH << " missing: run scripts/fetch_model.sh";
  }
};

TEST_F(VocabReference, FixtureIsForThisModel) {
  EXPECT_EQ(corpus()["model"], "SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_GE(corpus()["cases"].size(), 300u);
  const Vocab& v = model_vocab();
  EXPECT_EQ(v.size(), corpus()["n_vocab"].get<size_t>());
  EXPECT_EQ(v.bos(), corpus()["bos"].get<int32_t>());
  EXPECT_EQ(v.eos(), corpus()["eos"].get<int32_t>());
}

TEST_F(VocabReference, EndOfGenerationAndControlTokensMatchLlamaCpp) {
  const Vocab& v = model_vocab();
  std::vector<int32_t> eog, control;
  for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id) {
    if (v.is_eog(id)) eog.push_back(id);
    if (v.is_control(id)) control.push_back(id);
  }
  EXPECT_EQ(eog, corpus()["eog_ids"].get<std::vector<int32_t>>());  // <|endoftext|>, <|im_end|>, <reponame>
  EXPECT_EQ(control, corpus()["control_ids"].get<std::vector<int32_t>>());
  EXPECT_FALSE(v.is_eog(-1));
  EXPECT_FALSE(v.is_eog(static_cast<int32_t>(v.size())));
}

// The corpus in both modes: every id sequence must equal llama.cpp's.
void expect_ids_match(bool parse_special) {
  const Vocab& v = model_vocab();
  const char* key = parse_special ? "ids_special" : "ids";
  size_t matched = 0;
  for (const json& c : corpus()["cases"]) {
    const std::string text = base64_decode(c["b64"].get<std::string>());
    const auto expected = c[key].get<std::vector<int32_t>>();
    const auto got = v.encode(text, parse_special);
    if (got == expected) {
      ++matched;
    } else {
      ADD_FAILURE() << "'" << escaped(text) << "': got " << testing::PrintToString(got) << ", llama.cpp "
                    << testing::PrintToString(expected);
    }
  }
  EXPECT_EQ(matched, corpus()["cases"].size());
}

TEST_F(VocabReference, IdsMatchLlamaCppAsPlainText) { expect_ids_match(false); }
TEST_F(VocabReference, IdsMatchLlamaCppWithSpecialTokens) { expect_ids_match(true); }

TEST_F(VocabReference, DecodeMatchesLlamaCppDetokenize) {
  const Vocab& v = model_vocab();
  for (const json& c : corpus()["cases"]) {
    const std::string text = base64_decode(c["b64"].get<std::string>());
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const auto ids_special = c["ids_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(v.decode(ids), base64_decode(c["detok_b64"].get<std::string>())) << escaped(text);
    EXPECT_EQ(v.decode(ids_special), base64_decode(c["detok_special_b64"].get<std::string>()))
        << escaped(text);
  }
}

TEST_F(VocabReference, ValidUtf8RoundTripsInBothModes) {
  const Vocab& v = model_vocab();
  size_t n_valid = 0;
  for (const json& c : corpus()["cases"]) {
    const std::string text = base64_decode(c["b64"].get<std::string>());
    if (!valid_utf8(text)) continue;
    ++n_valid;
    EXPECT_EQ(v.decode(v.encode(text, false)), without_tokenless_bytes(text)) << escaped(text);
    EXPECT_EQ(v.decode(v.encode(text, true)), without_tokenless_bytes(text)) << escaped(text);
  }
  EXPECT_GT(n_valid, 250u);
}

TEST_F(VocabReference, InvalidUtf8BecomesReplacementCharacters) {
  const Vocab& v = model_vocab();
  // As llama.cpp: each byte that does not start a well-formed sequence is one U+FFFD.
  EXPECT_EQ(v.decode(v.encode("x\xe4\xb8", false)), "x\xef\xbf\xbd\xef\xbf\xbd");
  // Overlong forms and surrogates are decoded, not rejected, as llama.cpp does.
  EXPECT_EQ(v.decode(v.encode("a\xc0\x80"
                              "b",
                              false)),
            std::string("a\0b", 3));
  EXPECT_EQ(v.decode(v.encode("\xed\xa0\x80", false)), "\xed\xa0\x80");
  // Where llama.cpp aborts (a 4-byte form above U+10FFFF reaches unicode_cpt_to_utf8 and throws
  // out of llama_tokenize), we treat the lead byte as invalid: four U+FFFD.
  const std::string four_fffd = "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd";
  EXPECT_EQ(v.decode(v.encode("\xf4\x90\x80\x80", false)), four_fffd);
  EXPECT_EQ(v.decode(v.encode("\xf7\xbf\xbf\xbf", true)), four_fffd);
}

TEST_F(VocabReference, SpecialTokenTextIsPlainTextUnlessParsed) {
  const Vocab& v = model_vocab();
  const std::string text = "<|im_start|>user\nHi<|im_end|>";
  const auto parsed = v.encode(text, true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.front(), v.bos());
  EXPECT_EQ(parsed.back(), v.eos());
  for (int32_t id : v.encode(text, false)) EXPECT_FALSE(v.is_control(id));
  EXPECT_EQ(v.token_to_piece(v.eos()), "<|im_end|>");
  EXPECT_THROW(v.token_to_piece(-1), std::out_of_range);
  EXPECT_THROW(v.token_to_piece(static_cast<int32_t>(v.size())), std::out_of_range);
}

// The bytes llama.cpp's pre-tokenizer turns input into (see next_codepoint in vocab.cpp), written
// independently: a 1-4 byte form with the right continuation bytes decoding to at most U+10FFFF
// is re-encoded (so overlong forms shrink, surrogates stay); every other byte becomes U+FFFD.
std::string llama_normalized(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const size_t n = b < 0x80             ? 1
                     : (b & 0xE0) == 0xC0 ? 2
                     : (b & 0xF0) == 0xE0 ? 3
                     : (b & 0xF8) == 0xF0 ? 4
                                          : 0;
    bool ok = n > 0 && i + n <= s.size();
    uint32_t cpt = n == 1 ? b : b & (0x7Fu >> n);
    for (size_t k = 1; ok && k < n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      ok = (c & 0xC0) == 0x80;
      cpt = (cpt << 6) | (c & 0x3Fu);
    }
    if (!ok || cpt > 0x10FFFF) {
      out += "\xef\xbf\xbd";
      ++i;
      continue;
    }
    i += n;
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
  return out;
}

TEST_F(VocabReference, RandomBytesNeverCrashAndLoseOnlyBytesWithoutAToken) {
  const Vocab& v = model_vocab();
  EXPECT_EQ(without_tokenless_bytes(std::string("\x03\x04\x06\x13\x14\x16\x1d\x1e", 8)), "\x03\x1e");
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> len(0, 48), byte(0, 255), pick(0, 3);
  static const std::string kSpecials[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>"};
  for (int iter = 0; iter < 10000; ++iter) {
    std::string s;
    for (int i = len(rng); i > 0; --i) {
      // Mostly random bytes, now and then a special token's text.
      if (byte(rng) < 4)
        s += kSpecials[pick(rng)];
      else
        s.push_back(static_cast<char>(byte(rng)));
    }
    for (bool special : {false, true}) {
      const auto ids = v.encode(s, special);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && static_cast<size_t>(id) < v.size());
      ASSERT_EQ(v.decode(ids), without_tokenless_bytes(llama_normalized(s))) << escaped(s);
    }
  }
}

TEST_F(VocabReference, StreamerNeverSplitsACharacter) {
  const Vocab& v = model_vocab();
  for (const json& c : corpus()["cases"]) {
    const std::string text = base64_decode(c["b64"].get<std::string>());
    if (!valid_utf8(text)) continue;
    Utf8Streamer streamer;
    std::string joined;
    for (int32_t id : c["ids"].get<std::vector<int32_t>>()) {
      const std::string chunk = streamer.push(v.token_to_piece(id));
      EXPECT_TRUE(valid_utf8(chunk)) << escaped(text) << " chunk " << escaped(chunk);
      joined += chunk;
    }
    joined += streamer.flush();
    EXPECT_EQ(joined, without_tokenless_bytes(text));
  }
}

TEST(Utf8Streamer, HoldsAnIncompleteSequenceUntilComplete) {
  Utf8Streamer s;
  const std::string smile = "\xf0\x9f\x98\x80";
  EXPECT_EQ(s.push("a"), "a");
  EXPECT_EQ(s.push(smile.substr(0, 1)), "");
  EXPECT_EQ(s.push(smile.substr(1, 2)), "");
  EXPECT_EQ(s.push(smile.substr(3) + "b\xc3"), smile + "b");
  EXPECT_EQ(s.push("\xa9"), "\xc3\xa9");
  EXPECT_EQ(s.flush(), "");
}

TEST(ReplacementCharacters, ValidTextIsUnchanged) {
  const std::string text = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80z";
  EXPECT_EQ(with_replacement_characters(text), text);
  EXPECT_EQ(with_replacement_characters(""), "");
}

// As the server's JSON encoder (nlohmann's error_handler_t::replace) writes the same bytes.
TEST(ReplacementCharacters, EachIllFormedSequenceIsOneReplacement) {
  const std::string fffd = "\xef\xbf\xbd";
  // A generation cut after the first two bytes of a 3-byte character.
  EXPECT_EQ(with_replacement_characters("ok\xe4\xb8"), "ok" + fffd);
  EXPECT_EQ(with_replacement_characters("\x80\x80"), fffd + fffd);         // stray continuations
  EXPECT_EQ(with_replacement_characters("\xff" "a"), fffd + "a");            // never a lead byte
  EXPECT_EQ(with_replacement_characters("\xe4" "a"), fffd + "a");            // cut by another char
  EXPECT_EQ(with_replacement_characters("\xc0\xaf"), fffd + fffd);            // overlong '/'
  EXPECT_EQ(with_replacement_characters("\xed\xa0\x80"), fffd + fffd + fffd);  // a surrogate
  EXPECT_EQ(with_replacement_characters("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // > U+10FFFF
}

TEST(Utf8Streamer, InvalidBytesPassThroughAndFlushReleasesTheTail) {
  Utf8Streamer s;
  EXPECT_EQ(s.push("\xff"), "\xff");
  EXPECT_EQ(s.push("\x80\x80"), "\x80\x80");
  EXPECT_EQ(s.push("\xe4"), "");
  EXPECT_EQ(s.push("a"),
            "\xe4"
            "a");  // the sequence can no longer complete
  EXPECT_EQ(s.push("\xe4\xb8"), "");
  EXPECT_EQ(s.flush(), "\xe4\xb8");
  EXPECT_EQ(s.flush(), "");
}

// A hand-made vocabulary for what SmolLM2's does not exercise: user-defined tokens, merges whose
// result is missing from the vocabulary, and bad metadata.
test::GgufBuilder tiny_vocab(std::vector<std::string> tokens, std::vector<int32_t> types,
                             std::vector<std::string> merges) {
  test::GgufBuilder b;
  b.kv_string("tokenizer.ggml.model", "gpt2")
      .kv_string("tokenizer.ggml.pre", "smollm")
      .kv_strings("tokenizer.ggml.tokens", tokens)
      .kv_array<int32_t>("tokenizer.ggml.token_type", 5, types)
      .kv_strings("tokenizer.ggml.merges", merges)
      .kv<uint32_t>("tokenizer.ggml.eos_token_id", 4, 0);
  return b;
}

TEST(VocabTiny, UserDefinedTokensSplitEvenWithoutParseSpecial) {
  // 0 <s> control, 1 <tool> user-defined, then a b c Ġ ab Ġa; "b c" merges into a missing "bc".
  const auto bytes = tiny_vocab({"<s>", "<tool>", "a", "b", "c", "\xc4\xa0", "ab",
                                 "\xc4\xa0"
                                 "a",
                                 "<", ">", "s", "/"},
                                {3, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {"a b", "\xc4\xa0 a", "b c"})
                         .build();
  const Vocab v = Vocab::from_gguf(GgufFile::parse(bytes, "tiny.gguf"));
  EXPECT_EQ(v.encode("ab a", false), (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(v.encode("bc", false), (std::vector<int32_t>{3, 4}));  // byte fallback
  EXPECT_EQ(v.encode("a<tool>b", false), (std::vector<int32_t>{2, 1, 3}));
  EXPECT_EQ(v.encode("<s>", false), (std::vector<int32_t>{8, 10, 9}));
  EXPECT_EQ(v.encode("<s>", true), (std::vector<int32_t>{0}));
  EXPECT_EQ(v.decode(std::vector<int32_t>{0, 1, 7}), "<s><tool> a");
  EXPECT_TRUE(v.is_eog(0));
  EXPECT_EQ(v.bos(), -1);
}

void expect_gguf_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  try {
    Vocab::from_gguf(GgufFile::parse(bytes, "bad.gguf"));
    ADD_FAILURE() << "no error; expected one mentioning " << fragment;
  } catch (const GgufError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(VocabTiny, BadMetadataIsANamedError) {
  expect_gguf_error(test::GgufBuilder().build(), "tokenizer.ggml.model");
  expect_gguf_error(test::GgufBuilder().kv_string("tokenizer.ggml.model", "llama").build(),
                    "'llama' is not supported");
  expect_gguf_error(test::GgufBuilder()
                        .kv_string("tokenizer.ggml.model", "gpt2")
                        .kv_string("tokenizer.ggml.pre", "qwen2")
                        .build(),
                    "'qwen2' is not supported");
  expect_gguf_error(tiny_vocab({"a", "b"}, {1}, {"a b"}).build(), "token_type has 1 entries for 2 tokens");
  expect_gguf_error(tiny_vocab({"a", "b"}, {1, 1}, {"ab"}).build(), "merges[0] 'ab'");
  auto no_eos = test::GgufBuilder()
                    .kv_string("tokenizer.ggml.model", "gpt2")
                    .kv_string("tokenizer.ggml.pre", "smollm")
                    .kv_strings("tokenizer.ggml.tokens", {"a"})
                    .kv_strings("tokenizer.ggml.merges", {});
  expect_gguf_error(no_eos.build(), "eos_token_id not found");
  expect_gguf_error(tiny_vocab({"a"}, {1}, {}).kv<uint32_t>("tokenizer.ggml.bos_token_id", 4, 7).build(),
                    "bos_token_id 7 is outside the 1 tokens");
}

}  // namespace
}  // namespace vigil
