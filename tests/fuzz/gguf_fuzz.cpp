// libFuzzer target: the GGUF reader on arbitrary bytes must throw GgufError or succeed, never crash.
#include <cstddef>
#include <cstdint>

#include "model/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    vigil::GgufFile f = vigil::GgufFile::parse({data, size}, "fuzz.gguf");
    // Touch what a loader touches: every tensor's bytes and every string array.
    volatile uint8_t sink = 0;
    for (const auto& t : f.tensors())
      if (t.n_bytes) sink = static_cast<uint8_t>(sink ^ t.data[0] ^ t.data[t.n_bytes - 1]);
    for (const auto& [key, value] : f.metadata())
      for (auto s : value.strings)
        if (!s.empty()) sink = static_cast<uint8_t>(sink ^ static_cast<uint8_t>(s.back()));
  } catch (const vigil::GgufError&) {
  }
  return 0;
}
