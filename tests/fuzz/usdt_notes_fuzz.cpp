// libFuzzer target: the agent's reading of a workload's ELF file before libbpf sees it. Any input
// either gives sites (each counted at least once, one note each) or a refusal with a reason; every
// note's argument string parses into at most kMaxUsdtArgs arguments or an error, never both; reads
// stay inside the input (ASan) and the notes section's size limit holds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "probes/usdt_args.h"
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
  size_t sites = 0;
  for (const auto& [probe, n] : notes.sites) {
    if (n < 1 || probe.find(':') == std::string::npos) std::abort();
    sites += static_cast<size_t>(n);
  }
  if (sites != notes.notes.size()) std::abort();
  for (const auto& note : notes.notes) {
    const auto args = vigil::agent::parse_usdt_args(note.args);
    if (!args.error.empty() && !args.args.empty()) std::abort();
    if (args.args.size() > static_cast<size_t>(vigil::agent::kMaxUsdtArgs)) std::abort();
    for (const auto& a : args.args)
      if (a.size == 0 || a.size > 8 || a.size < -8) std::abort();
  }
  return 0;
}
