// libFuzzer target: the agent's reading of a workload's ELF file before libbpf sees it. Any input
// either gives sites (each counted at least once) or a refusal with a reason; reads stay inside
// the input (ASan) and the notes section's size limit holds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "probes/usdt_notes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto notes = vigil::agent::read_usdt_notes(
      [data, size](uint64_t off, void* buf, size_t len) {
        if (off > size || len > size - off) return false;
        std::memcpy(buf, data + off, len);
        return true;
      },
      size);
  if (!notes.error.empty() && !notes.sites.empty()) std::abort();
  for (const auto& [probe, n] : notes.sites)
    if (n < 1 || probe.find(':') == std::string::npos) std::abort();
  return 0;
}
