// Finds the files the agent probes (libcuda, libnccl, USDT carriers) in the maps of running processes.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "discovery/mapped_file.h"
#include "discovery/maps_reader.h"

namespace vigil::agent {

class AgentStats;

// kUsdt: files that may carry allocator USDT probes (PyTorch's libc10/libtorch_cuda, vigil-worker).
enum class LibraryKind { kCuda, kNccl, kUsdt };

// One executable mapping of a library we probe, as /proc/PID/maps shows it.
struct MapsEntry {
  std::string range;  // "start-end", names the /proc/PID/map_files link
  std::string path;   // as the kernel prints it for the reader; only a name, never opened
  bool deleted = false;
  LibraryKind kind;
  dev_t dev = 0;      // the mapped file's (device, inode), from the kernel
  ino_t inode = 0;
};

// What one process's maps may cost. A process past max_lines or max_bytes is scanned up to there
// (its later mappings unseen); one mapping more than max_files distinct probed files keeps the
// first max_files. Opened files per scan are capped too; the rest are opened on the next scans.
struct ScanLimits {
  MapsLimits maps;
  size_t max_files;
  size_t max_opened_per_scan;
};
// 262,144 lines: vm.max_map_count as large-memory nodes raise it (the default is 65,530);
// 32 MiB: that many lines of 128 bytes, or 8,000 lines with paths near PATH_MAX.
inline constexpr ScanLimits kScanLimits{{262144, 32u << 20}, 64, 256};

struct ProcessMaps {
  std::vector<MapsEntry> entries;  // one per distinct (device, inode), in maps order
  bool opened = false;
  bool truncated = false;          // past limits.maps
  bool too_many_files = false;     // past limits.max_files
};
// The executable mappings of probed libraries in the maps file at MAPS_PATH.
ProcessMaps probed_mappings(const std::string& maps_path, const ScanLimits& limits);

struct LibraryHit {
  uint32_t pid = 0;
  LibraryKind kind;
  std::string name;  // for logs: "/proc/PID/map_files/RANGE -> PATH"
  dev_t dev = 0;
  ino_t inode = 0;
  MappedFile file;   // open while the hit lives; file.path() is what libbpf and the kernel get
};

// Scans processes' maps and opens each probed file once, through map_files (mapped_file.h).
class LibraryScanner {
 public:
  LibraryScanner(std::string proc_root, AgentStats* stats, ScanLimits limits = kScanLimits)
      : proc_root_(std::move(proc_root)), stats_(stats), limits_(limits) {}

  struct Result {
    std::vector<LibraryHit> opened;  // files not handed out before, open
    std::vector<LibraryHit> mapped;  // every distinct probed file seen, not opened
  };
  // Scans PID (0: every process under proc_root) into OUT.
  void scan(uint32_t pid, Result& out);
  // After a full scan: a file no process maps any more is opened again when it is next seen.
  void retain(const std::vector<LibraryHit>& mapped);

 private:
  void refuse(Refusal why);
  void scan_process(uint32_t pid, Result& out, std::set<std::pair<dev_t, ino_t>>& seen, size_t& opened);

  std::string proc_root_;
  AgentStats* stats_;
  ScanLimits limits_;
  std::set<std::pair<dev_t, ino_t>> handed_out_;
};

// The distinct files (device, inode) of one kind among `hits`.
std::set<std::pair<dev_t, ino_t>> files_of_kind(const std::vector<LibraryHit>& hits, LibraryKind kind);

}  // namespace vigil::agent
