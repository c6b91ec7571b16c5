// Library discovery. The maps line gives a file's name and (device, inode); the file is opened
// through /proc/PID/map_files/<range>, the kernel's reference to what is mapped, and only if it
// is that regular file: paths inside a workload's root are its to change (a FIFO that blocks an
// open, a symlink into the host, a rename between two lookups), so none is ever walked.
#include "discovery/library_scanner.h"

#include <dirent.h>

#include <cctype>

#include "stats/agent_stats.h"

namespace vigil::agent {
namespace {

bool kind_of(std::string_view path, LibraryKind& kind) {
  auto slash = path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (base.starts_with("libcuda.so")) { kind = LibraryKind::kCuda; return true; }
  if (base.starts_with("libnccl.so")) { kind = LibraryKind::kNccl; return true; }
  for (std::string_view usdt : {"libc10_cuda.so", "libc10.so", "libtorch_cuda.so", "vigil-worker"}) {
    if (base.starts_with(usdt)) { kind = LibraryKind::kUsdt; return true; }
  }
  return false;
}

}  // namespace

ProcessMaps probed_mappings(const std::string& maps_path, const ScanLimits& limits) {
  ProcessMaps out;
  std::set<std::pair<dev_t, ino_t>> seen;
  MapsReadResult read = read_maps(maps_path, limits.maps, [&](const MapsLine& line) {
    if (line.perms[2] != 'x' || line.inode == 0 || !line.path.starts_with('/')) return;
    std::string_view path = line.path;
    constexpr std::string_view kDeleted = " (deleted)";
    bool deleted = path.size() > kDeleted.size() && path.ends_with(kDeleted);
    if (deleted) path.remove_suffix(kDeleted.size());
    LibraryKind kind;
    if (!kind_of(path, kind) || seen.count({line.dev, line.inode})) return;
    if (out.entries.size() >= limits.max_files) {
      out.too_many_files = true;
      return;
    }
    seen.insert({line.dev, line.inode});
    out.entries.push_back({std::string(line.range), std::string(path), deleted, kind, line.dev, line.inode});
  });
  out.opened = read.opened;
  out.truncated = read.truncated;
  return out;
}

void LibraryScanner::refuse(Refusal why) {
  if (stats_ && why != Refusal::kNone && why != Refusal::kGone) stats_->discovery_refused(refusal_name(why));
}

void LibraryScanner::scan_process(uint32_t pid, Result& out, std::set<std::pair<dev_t, ino_t>>& seen,
                                  size_t& opened) {
  std::string base = proc_root_ + "/" + std::to_string(pid);
  ProcessMaps maps = probed_mappings(base + "/maps", limits_);
  if (maps.truncated) refuse(Refusal::kMapsTooLarge);
  if (maps.too_many_files) refuse(Refusal::kTooManyFiles);
  for (auto& e : maps.entries) {
    const std::pair<dev_t, ino_t> id{e.dev, e.inode};
    if (!seen.insert(id).second) continue;  // another process maps it too
    out.mapped.push_back({pid, e.kind, {}, e.dev, e.inode, {}});
    if (handed_out_.count(id) || opened >= limits_.max_opened_per_scan) continue;
    std::string link = base + "/map_files/" + e.range;
    Refusal why = Refusal::kNone;
    MappedFile file = open_mapped_file(link, e.dev, e.inode, why);
    if (!file.is_open()) {  // tried again on the next scan
      refuse(why);
      continue;
    }
    handed_out_.insert(id);
    ++opened;
    out.opened.push_back({pid, e.kind, link + " -> " + e.path, e.dev, e.inode, std::move(file)});
  }
}

void LibraryScanner::scan(uint32_t only_pid, Result& out) {
  std::set<std::pair<dev_t, ino_t>> seen;
  size_t opened = 0;
  if (only_pid != 0) {
    scan_process(only_pid, out, seen, opened);
    return;
  }
  DIR* d = opendir(proc_root_.c_str());
  if (!d) return;
  while (dirent* de = readdir(d)) {
    if (!std::isdigit(static_cast<unsigned char>(de->d_name[0]))) continue;
    scan_process(static_cast<uint32_t>(std::stoul(de->d_name)), out, seen, opened);
  }
  closedir(d);
}

void LibraryScanner::retain(const std::vector<LibraryHit>& mapped) {
  std::set<std::pair<dev_t, ino_t>> still;
  for (const auto& hit : mapped) still.insert({hit.dev, hit.inode});
  std::erase_if(handed_out_, [&](const auto& id) { return !still.count(id); });
}

std::set<std::pair<dev_t, ino_t>> files_of_kind(const std::vector<LibraryHit>& hits, LibraryKind kind) {
  std::set<std::pair<dev_t, ino_t>> files;
  for (const auto& hit : hits)
    if (hit.kind == kind) files.insert({hit.dev, hit.inode});
  return files;
}

}  // namespace vigil::agent
