// /proc/PID/maps, streamed: one fixed buffer per read, lines handed out as views into it. A
// process with 60,000 mappings of a 3.8 KB path has 230 MB of maps; the agent holds 64 KiB of it.
#include "discovery/maps_reader.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

namespace vigil::agent {
namespace {

// A line is at most a path (PATH_MAX, 4096) plus its fields; one longer than the buffer is not
// one the kernel wrote and is skipped.
constexpr size_t kBufferSize = 64 * 1024;

std::string_view next_field(std::string_view& rest) {
  size_t start = rest.find_first_not_of(' ');
  if (start == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(start);
  size_t end = rest.find(' ');
  std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  return field;
}

template <typename T>
bool parse_number(std::string_view s, int base, T& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

bool parse_maps_line(std::string_view line, MapsLine& out) {
  std::string_view rest = line;
  out.range = next_field(rest);
  out.perms = next_field(rest);
  std::string_view offset = next_field(rest);
  std::string_view dev = next_field(rest);
  std::string_view inode = next_field(rest);
  if (out.range.find('-') == std::string_view::npos || out.perms.size() < 4 || offset.empty()) return false;
  size_t colon = dev.find(':');
  unsigned major = 0, minor = 0;
  unsigned long ino = 0;
  if (colon == std::string_view::npos || !parse_number(dev.substr(0, colon), 16, major) ||
      !parse_number(dev.substr(colon + 1), 16, minor) || !parse_number(inode, 10, ino))
    return false;
  out.dev = makedev(major, minor);
  out.inode = static_cast<ino_t>(ino);
  // The path starts after the padding show_map_vma inserts; it may itself contain spaces.
  size_t start = rest.find_first_not_of(' ');
  out.path = start == std::string_view::npos ? std::string_view{} : rest.substr(start);
  return true;
}

MapsReadResult read_maps(const std::string& path, const MapsLimits& limits,
                         const std::function<void(const MapsLine&)>& on_line) {
  MapsReadResult result;
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return result;
  result.opened = true;
  auto buffer = std::make_unique<char[]>(kBufferSize);
  size_t have = 0;
  bool skipping = false;  // inside a line longer than the buffer
  while (true) {
    if (result.lines >= limits.max_lines || result.bytes >= limits.max_bytes) {
      char more;  // a file that ends exactly at the limit is whole
      result.truncated = have > 0 || read(fd.get(), &more, 1) > 0;
      break;
    }
    size_t want = kBufferSize - have;
    if (uint64_t left = limits.max_bytes - result.bytes; left < want) want = static_cast<size_t>(left);
    ssize_t n = read(fd.get(), buffer.get() + have, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file, or the process is gone
    result.bytes += static_cast<uint64_t>(n);
    have += static_cast<size_t>(n);
    size_t start = 0;
    while (start < have && result.lines < limits.max_lines) {
      auto* nl = static_cast<char*>(std::memchr(buffer.get() + start, '\n', have - start));
      if (!nl) break;
      size_t end = static_cast<size_t>(nl - buffer.get());
      if (!skipping) {
        MapsLine line;
        if (parse_maps_line(std::string_view(buffer.get() + start, end - start), line)) on_line(line);
      }
      skipping = false;
      ++result.lines;
      start = end + 1;
    }
    if (start == 0 && have == kBufferSize) {  // no newline in a full buffer
      skipping = true;
      have = 0;
      continue;
    }
    std::memmove(buffer.get(), buffer.get() + start, have - start);
    have -= start;
  }
  return result;
}

}  // namespace vigil::agent
