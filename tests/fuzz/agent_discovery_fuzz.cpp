// libFuzzer target: what discovery reads from a workload's /proc entries and from container log
// names. The input is read as /proc/PID/maps text (through the streaming reader, from a memfd, and
// line by line), as /proc/PID/cgroup text and as a log file name. Every accepted maps line must
// point inside the text it came from, and the streaming reader must see the same lines as a plain
// split at newlines (inputs stay under its 64 KiB buffer: lines across a refill are
// agent_maps_reader_test's); an identity is well formed or empty; a parsed log name has its parts
// non-empty and free of '_' (a file name never holds '/').
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "discovery/cgroup.h"
#include "discovery/maps_reader.h"
#include "discovery/pod_names.h"

namespace {

using vigil::agent::MapsLine;

struct Seen {
  std::string range, path;
  dev_t dev;
  ino_t inode;
  bool operator==(const Seen&) const = default;
};

std::vector<Seen> by_lines(std::string_view text) {
  std::vector<Seen> out;
  // The kernel ends every line with a newline: text after the last one is not a line.
  for (size_t nl; (nl = text.find('\n')) != std::string_view::npos; text.remove_prefix(nl + 1)) {
    const std::string_view line = text.substr(0, nl);
    MapsLine m;
    if (vigil::agent::parse_maps_line(line, m)) {
      if (m.range.data() < line.data() || m.range.data() + m.range.size() > line.data() + line.size()) std::abort();
      if (!m.path.empty() && (m.path.data() < line.data() || m.path.data() + m.path.size() > line.data() + line.size()))
        std::abort();
      out.push_back({std::string(m.range), std::string(m.path), m.dev, m.inode});
    }
  }
  return out;
}

void check_identity(const vigil::agent::ContainerIdentity& id) {
  if (!id.container_id.empty() && id.container_id.size() != 64) std::abort();
  for (char c : id.container_id)
    if (!std::isxdigit(static_cast<unsigned char>(c))) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<Seen> lines = by_lines(text);

  const int fd = memfd_create("maps", MFD_CLOEXEC);
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
  std::vector<Seen> streamed;
  const auto r = vigil::agent::read_maps("/proc/self/fd/" + std::to_string(fd), {1u << 20, 1u << 30},
                                         [&](const MapsLine& m) {
                                           streamed.push_back({std::string(m.range), std::string(m.path), m.dev, m.inode});
                                         });
  close(fd);
  if (!r.opened || r.truncated || streamed != lines) std::abort();

  check_identity(vigil::agent::parse_cgroup(text));
  if (auto names = vigil::agent::parse_container_log_name(text)) {
    for (const std::string* part : {&names->second.namespace_name, &names->second.pod, &names->second.container})
      if (part->empty() || part->find('_') != std::string::npos) std::abort();
  }
  return 0;
}
