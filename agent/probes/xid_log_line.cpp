// Parses NVIDIA's XID kernel log line; the format and its source are in xid_log_line.h.
#include "probes/xid_log_line.h"

#include <cctype>
#include <charconv>

namespace vigil::agent {
namespace {

constexpr std::string_view kMarker = "NVRM: Xid (";

bool take(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

bool hex_digits(std::string_view& s, size_t n, std::string& out) {
  if (s.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  }
  s.remove_prefix(n);
  return true;
}

bool decimal(std::string_view& s, uint32_t& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || ptr == s.data()) return false;
  s.remove_prefix(static_cast<size_t>(ptr - s.data()));
  return true;
}

// " GPU-I:05" and " GPU-CI:01" (MIG attribution): skipped, the GPU is the PCI device.
void skip_instance(std::string_view& s, std::string_view tag) {
  std::string_view t = s;
  uint32_t ignored = 0;
  if (take(t, tag) && decimal(t, ignored)) s = t;
}

// "KEY=VALUE, " -> VALUE; leaves S alone when it does not start with KEY=.
std::optional<std::string_view> field(std::string_view& s, std::string_view key) {
  std::string_view t = s;
  if (!take(t, key)) return std::nullopt;
  const size_t end = t.find(", ");
  if (end == std::string_view::npos) return std::nullopt;
  s = t.substr(end + 2);
  return t.substr(0, end);
}

}  // namespace

bool looks_like_xid_line(std::string_view message) { return message.find(kMarker) != std::string_view::npos; }

std::optional<XidLogLine> parse_xid_log_line(std::string_view message) {
  const size_t at = message.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view s = message.substr(at + kMarker.size());
  XidLogLine line;
  if (!take(s, "PCI:") || !hex_digits(s, 4, line.gpu)) return std::nullopt;
  line.gpu += ':';
  if (!take(s, ":") || !hex_digits(s, 2, line.gpu)) return std::nullopt;
  line.gpu += ':';
  if (!take(s, ":") || !hex_digits(s, 2, line.gpu)) return std::nullopt;
  line.gpu += ".0";
  skip_instance(s, " GPU-I:");
  skip_instance(s, " GPU-CI:");
  if (!take(s, "): ") || !decimal(s, line.code) || !take(s, ", ")) return std::nullopt;
  if (auto pid = field(s, "pid=")) {
    uint32_t n = 0;
    std::string_view digits = *pid;
    if (decimal(digits, n) && digits.empty()) line.pid = n;
    // Some drivers print the pid alone ("pid=7194, Contained: ...", kern_gpu_error_cont_ga100.c).
    if (auto name = field(s, "name="); name && *name != "<unknown>")
      line.process = std::string(name->substr(0, kXidProcessMax));
  }
  line.message = std::string(s);
  return line;
}

}  // namespace vigil::agent
