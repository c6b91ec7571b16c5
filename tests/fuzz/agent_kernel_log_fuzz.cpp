// libFuzzer target: the kernel log as the agent reads it, records in /dev/kmsg's format through
// the record parser, the XID line parser and the ledger. Invariants: an XID line names a GPU as
// pci_name() does, a process of at most 15 bytes; every kernel XID line counts exactly once and a
// line of another facility never counts.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "probes/kmsg_record.h"
#include "probes/xid_ledger.h"
#include "probes/xid_log_line.h"

namespace {

bool pci_name(const std::string& gpu) {
  if (gpu.size() != 12 || gpu.compare(4, 1, ":") || gpu.compare(7, 1, ":") || gpu.compare(10, 2, ".0")) return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!std::isxdigit(static_cast<unsigned char>(gpu[i])) || std::isupper(static_cast<unsigned char>(gpu[i])))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vigil::agent;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  XidLedger ledger;  // no tracepoint: every kernel XID line counts at once
  uint64_t kernel_xid_lines = 0;
  size_t start = 0;
  while (start < input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view text = input.substr(start, end - start);
    start = end + 1;
    const auto record = parse_kmsg_record(text);
    if (!record) continue;
    if (auto line = parse_xid_log_line(record->message)) {
      if (!pci_name(line->gpu) || line->process.size() > kXidProcessMax) std::abort();
      if (record->facility == kKernelFacility) ++kernel_xid_lines;
    }
    if (!ledger.on_log_record(*record)) std::abort();  // nothing waits without the tracepoint
  }
  const XidSnapshot s = ledger.read();
  uint64_t counted = 0;
  for (const auto& [series, n] : s.counts) counted += n;
  if (counted != kernel_xid_lines || s.log_lines != kernel_xid_lines) std::abort();
  return 0;
}
