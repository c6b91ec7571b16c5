// Opens a file a process maps through the kernel's own reference to it (/proc/PID/map_files), so
// no path the workload controls is walked, and checks it is the file its maps line names.
#pragma once

#include <sys/types.h>

#include <array>
#include <string>

namespace vigil::agent {

// Why a mapped file was not used. A bounded set: vigil_agent_discovery_refused_total{reason}.
enum class Refusal {
  kNone,
  kGone,            // the mapping or the process went away meanwhile (not counted)
  kOpenFailed,      // the map_files link could not be followed (no CAP_SYS_ADMIN?)
  kNotRegular,      // a FIFO, device or socket: never opened for reading
  kInodeMismatch,   // not the (device, inode) of the maps line: remapped meanwhile
  kFuse,            // on a FUSE file system, whose reads the workload may stall
  kMapsTooLarge,    // the process's maps passed the per-process limit: scanned partially
  kTooManyFiles,    // the process maps more probed files than the per-process limit
};
const char* refusal_name(Refusal r);
// Every counted reason, for exporting each at 0 from the start.
inline constexpr std::array kCountedRefusals{Refusal::kOpenFailed,   Refusal::kNotRegular,  Refusal::kInodeMismatch,
                                             Refusal::kFuse,         Refusal::kMapsTooLarge, Refusal::kTooManyFiles};

// An opened file, read-only and close-on-exec; path() reaches the same inode for as long as it
// lives, for libbpf's ELF parse and the kernel's uprobe lookup alike.
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(int fd);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // "/proc/self/fd/N": a magic link the kernel resolves to this open file's inode.
  std::string path() const;

 private:
  int fd_ = -1;
};

// Opens LINK (a /proc/PID/map_files entry; in tests any path) without blocking, without opening
// anything that is not a regular file, and only if it is (dev, inode). On failure `why` says why.
MappedFile open_mapped_file(const std::string& link, dev_t dev, ino_t inode, Refusal& why);

}  // namespace vigil::agent
