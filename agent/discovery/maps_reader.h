// Reads /proc/PID/maps line by line within limits: a workload chooses how long that file is.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace vigil::agent {

// One line of /proc/PID/maps (fs/proc/task_mmu.c show_map_vma): "start-end perms offset
// major:minor inode path". The views point into the reader's buffer, valid during the callback.
struct MapsLine {
  std::string_view range;  // "start-end", the name of the /proc/PID/map_files link
  std::string_view perms;  // "r-xp"
  dev_t dev = 0;           // makedev(major, minor): comparable with st_dev
  ino_t inode = 0;
  std::string_view path;   // empty for anonymous mappings; may end in " (deleted)"
};

// Parses one line (without its newline); false when it is not a maps line.
bool parse_maps_line(std::string_view line, MapsLine& out);

// Past either limit the rest of the file is not read.
struct MapsLimits {
  uint64_t max_lines;
  uint64_t max_bytes;
};

struct MapsReadResult {
  bool opened = false;
  bool truncated = false;  // a limit stopped the read: the process's later mappings are unseen
  uint64_t lines = 0;
  uint64_t bytes = 0;
};

// Calls on_line for each line of the file at PATH, reading it in fixed-size chunks: memory does
// not grow with the file.
MapsReadResult read_maps(const std::string& path, const MapsLimits& limits,
                         const std::function<void(const MapsLine&)>& on_line);

}  // namespace vigil::agent
