// Finds the files the agent probes (libcuda, libnccl, USDT carriers) in the maps of running processes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace vigil::agent {

// kUsdt: files that may carry allocator USDT probes (PyTorch's libc10/libtorch_cuda, vigil-worker).
enum class LibraryKind { kCuda, kNccl, kUsdt };

// One executable mapping of a library we probe, as /proc/PID/maps shows it.
struct MapsEntry {
  std::string range;  // "start-end", names the /proc/PID/map_files link
  std::string path;   // as the process sees it (inside its mount namespace)
  bool deleted = false;
  LibraryKind kind;
};

// Parses the text of /proc/PID/maps, keeping executable mappings of probed libraries.
std::vector<MapsEntry> parse_maps(const std::string& maps_text);

struct LibraryHit {
  uint32_t pid = 0;
  LibraryKind kind;
  std::string open_path;  // path this process's copy is reachable by from the agent
  dev_t dev = 0;
  ino_t inode = 0;
};

// Scans every /proc/PID/maps under proc_root (or only `pid` when non-zero).
std::vector<LibraryHit> scan_libraries(const std::string& proc_root, uint32_t pid = 0);

// The distinct files (device, inode) of one kind among `hits`.
std::set<std::pair<dev_t, ino_t>> files_of_kind(const std::vector<LibraryHit>& hits, LibraryKind kind);

}  // namespace vigil::agent
