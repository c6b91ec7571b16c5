// Library discovery: a process's copy of libcuda/libnccl is reached through /proc/PID/root/<path>
// so copies inside containers (or pip wheels) are found; a deleted file through
// /proc/PID/map_files/<range>. (device, inode) identifies the file so it is probed once.
#include "discovery/library_scanner.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cctype>
#include <set>
#include <sstream>

#include "discovery/process_table.h"

namespace vigil::agent {
namespace {

bool kind_of(const std::string& path, LibraryKind& kind) {
  auto slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.rfind("libcuda.so", 0) == 0) { kind = LibraryKind::kCuda; return true; }
  if (base.rfind("libnccl.so", 0) == 0) { kind = LibraryKind::kNccl; return true; }
  for (const char* usdt : {"libc10_cuda.so", "libc10.so", "libtorch_cuda.so", "vigil-worker"}) {
    if (base.rfind(usdt, 0) == 0) { kind = LibraryKind::kUsdt; return true; }
  }
  return false;
}

}  // namespace

std::vector<MapsEntry> parse_maps(const std::string& maps_text) {
  std::vector<MapsEntry> out;
  std::istringstream in(maps_text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode;
    if (!(fields >> range >> perms >> offset >> dev >> inode)) continue;
    if (perms.size() < 3 || perms[2] != 'x' || inode == "0") continue;
    std::string path;
    std::getline(fields >> std::ws, path);
    if (path.empty() || path[0] != '/') continue;
    MapsEntry e;
    constexpr std::string_view kDeleted = " (deleted)";
    if (path.size() > kDeleted.size() && path.compare(path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
      path.resize(path.size() - kDeleted.size());
      e.deleted = true;
    }
    if (!kind_of(path, e.kind)) continue;
    e.range = range;
    e.path = path;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<LibraryHit> scan_libraries(const std::string& proc_root, uint32_t only_pid) {
  std::vector<uint32_t> pids;
  if (only_pid != 0) {
    pids.push_back(only_pid);
  } else if (DIR* d = opendir(proc_root.c_str())) {
    while (dirent* de = readdir(d)) {
      if (!std::isdigit(static_cast<unsigned char>(de->d_name[0]))) continue;
      pids.push_back(static_cast<uint32_t>(std::stoul(de->d_name)));
    }
    closedir(d);
  }
  std::vector<LibraryHit> hits;
  for (uint32_t pid : pids) {
    std::string base = proc_root + "/" + std::to_string(pid);
    std::set<std::pair<dev_t, ino_t>> seen;
    for (const auto& e : parse_maps(read_text_file(base + "/maps"))) {
      std::string open_path = e.deleted ? base + "/map_files/" + e.range : base + "/root" + e.path;
      struct stat st{};
      if (stat(open_path.c_str(), &st) != 0) {
        open_path = base + "/map_files/" + e.range;
        if (stat(open_path.c_str(), &st) != 0) continue;  // the process is gone
      }
      if (!seen.insert({st.st_dev, st.st_ino}).second) continue;
      hits.push_back({pid, e.kind, open_path, st.st_dev, st.st_ino});
    }
  }
  return hits;
}

std::set<std::pair<dev_t, ino_t>> files_of_kind(const std::vector<LibraryHit>& hits, LibraryKind kind) {
  std::set<std::pair<dev_t, ino_t>> files;
  for (const auto& hit : hits)
    if (hit.kind == kind) files.insert({hit.dev, hit.inode});
  return files;
}

}  // namespace vigil::agent
