// Parses /dev/kmsg's record header; see kmsg_record.h for the format and its source.
#include "probes/kmsg_record.h"

#include <charconv>

namespace vigil::agent {
namespace {

// Reads a decimal field ending at `end` or at a ','; advances `p` past the comma.
bool number(std::string_view& rest, uint64_t& out) {
  const char* first = rest.data();
  const char* last = first + rest.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec != std::errc() || ptr == first) return false;
  rest.remove_prefix(static_cast<size_t>(ptr - first));
  return true;
}

bool comma(std::string_view& rest) {
  if (rest.empty() || rest.front() != ',') return false;
  rest.remove_prefix(1);
  return true;
}

}  // namespace

std::optional<KmsgRecord> parse_kmsg_record(std::string_view text) {
  const size_t semicolon = text.find(';');
  if (semicolon == std::string_view::npos) return std::nullopt;
  std::string_view header = text.substr(0, semicolon);
  uint64_t prio = 0;
  KmsgRecord r;
  if (!number(header, prio) || !comma(header) || !number(header, r.seq) || !comma(header) ||
      !number(header, r.ts_usec) || !comma(header) || header.empty())
    return std::nullopt;
  if (prio > 0xffffffffu) return std::nullopt;
  r.facility = static_cast<uint32_t>(prio >> 3);
  r.level = static_cast<uint32_t>(prio & 7);
  std::string_view message = text.substr(semicolon + 1);
  r.message = message.substr(0, message.find('\n'));
  return r;
}

}  // namespace vigil::agent
