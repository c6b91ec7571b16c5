// Parses tracefs format files: lines "field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;".
#include "probes/tracepoint_format.h"

#include <sstream>

#include "discovery/process_table.h"

namespace vigil::agent {

std::map<std::string, TracepointField> parse_tracepoint_format(const std::string& text) {
  std::map<std::string, TracepointField> fields;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto start = line.find("field:");
    if (start == std::string::npos) continue;
    auto semi = line.find(';', start);
    auto off = line.find("offset:", semi);
    auto size = line.find("size:", semi);
    if (semi == std::string::npos || off == std::string::npos || size == std::string::npos) continue;
    std::string decl = line.substr(start + 6, semi - start - 6);  // "TYPE NAME" or "TYPE NAME[N]"
    auto space = decl.rfind(' ');
    if (space == std::string::npos) continue;
    std::string name = decl.substr(space + 1);
    if (auto bracket = name.find('['); bracket != std::string::npos) name.resize(bracket);
    TracepointField f;
    f.type = decl.substr(0, space);
    try {
      f.offset = static_cast<unsigned>(std::stoul(line.substr(off + 7)));
      f.size = static_cast<unsigned>(std::stoul(line.substr(size + 5)));
    } catch (const std::exception&) {
      continue;
    }
    fields[name] = f;
  }
  return fields;
}

std::optional<std::map<std::string, TracepointField>> read_tracepoint_format(
    const std::string& tracefs, const std::string& category, const std::string& name) {
  std::string text = read_text_file(tracefs + "/events/" + category + "/" + name + "/format");
  if (text.empty()) return std::nullopt;
  return parse_tracepoint_format(text);
}

}  // namespace vigil::agent
