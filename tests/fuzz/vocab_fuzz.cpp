// libFuzzer target: the tokenizer on arbitrary bytes (both special-token modes) must not crash,
// and decoding what it encoded must not either.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "model/gguf.h"
#include "model/vocab.h"

namespace {
const vigil::Vocab& vocab() {
  static const auto file = std::make_unique<vigil::GgufFile>(vigil::GgufFile::open(VIGIL_MODEL_PATH));
  static const vigil::Vocab v = vigil::Vocab::from_gguf(*file);
  return v;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto ids = vocab().encode(text, (data[0] & 1) != 0);
  (void)vocab().decode(ids);
  return 0;
}
