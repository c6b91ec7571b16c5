// Parses a tracefs tracepoint format file (events/CATEGORY/NAME/format) into field offsets, for
// tracepoints whose types are not in the kernel's BTF (module tracepoints such as nvidia's).
#pragma once

#include <map>
#include <optional>
#include <string>

namespace vigil::agent {

struct TracepointField {
  std::string type;  // as written, e.g. "__data_loc char[]", "u32"
  unsigned offset = 0;
  unsigned size = 0;
  bool data_loc() const { return type.rfind("__data_loc", 0) == 0; }
};

// Field name -> field; empty when the text is not a format file.
std::map<std::string, TracepointField> parse_tracepoint_format(const std::string& text);

// Reads TRACEFS/events/CATEGORY/NAME/format; nullopt when the tracepoint does not exist.
std::optional<std::map<std::string, TracepointField>> read_tracepoint_format(
    const std::string& tracefs, const std::string& category, const std::string& name);

}  // namespace vigil::agent
