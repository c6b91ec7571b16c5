// Uprobes on a library's functions: attached for every process (pid -1) that maps the same file,
// so a library is probed once however many processes use it, and new processes are covered.
#include "probes/uprobe_set.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "probes/pinned_state.h"

namespace vigil::agent {

bool UprobeSet::attach_one(FileLinks::File& lib, const std::string& path, const UprobeTarget& t, bool retprobe) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = t.cookie, .retprobe = retprobe,
              .func_name = t.symbol);
  Link link(bpf_program__attach_uprobe_opts(retprobe ? exit_ : enter_, -1, path.c_str(), 0, &opts));
  if (!link) {
    int err = errno;
    if (err == ENOENT && t.optional) return false;
    std::fprintf(stderr, "vigil-agent: %s: cannot attach %s%s in %s: %s\n", set_.c_str(),
                 retprobe ? "uretprobe " : "uprobe ", t.symbol, lib.name.c_str(), errno_reason(err).c_str());
    stats_.attach_failure(set_, err == ENOENT ? "symbol_missing" : errno_reason(err));
    return false;
  }
  pin(lib, link.get(), t, retprobe);
  lib.links.push_back(std::move(link));
  return true;
}

// A link that cannot be pinned still counts while this agent runs: said, not fatal.
void UprobeSet::pin(FileLinks::File& lib, bpf_link* link, const UprobeTarget& t, bool retprobe) {
  if (lib.pin_dir.empty()) return;
  std::string path = lib.pin_dir + "/" + t.symbol + (retprobe ? "_return" : "_entry");
  if (int err = bpf_link__pin(link, path.c_str()))
    std::fprintf(stderr, "vigil-agent: %s: cannot pin %s: %s\n", set_.c_str(), path.c_str(), errno_reason(-err).c_str());
}

int UprobeSet::attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name) {
  auto [lib, added] = files_.seen({dev, inode});
  if (!added) return 0;
  lib.name = name;
  if (!pin_dir_.empty()) {
    std::string dir = pin_dir_ + "/" + std::to_string(dev) + "_" + std::to_string(inode);
    if (mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) lib.pin_dir = dir;
  }
  for (const auto& t : targets_) {
    // An entry probe without its return probe would leave calls half-seen: attach both or none.
    if (!attach_one(lib, path, t, false)) continue;
    if (!attach_one(lib, path, t, true)) lib.links.pop_back();
  }
  int n = static_cast<int>(lib.links.size());
  stats_.add_attached(set_, n);
  std::fprintf(stderr, "vigil-agent: %s: %d probes attached in %s\n", set_.c_str(), n, name.c_str());
  return n;
}

int UprobeSet::attach_pinned(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    stats_.attach_failure(set_, "library_missing");
    std::fprintf(stderr, "vigil-agent: %s: library %s not found\n", set_.c_str(), path.c_str());
    return 0;
  }
  int n = attach(path, st.st_dev, st.st_ino, path);
  files_.seen({st.st_dev, st.st_ino}).first.pinned = true;
  return n;
}

void UprobeSet::adopt_pinned_links(const std::string& set_dir) {
  std::string root = set_dir + "/links";
  mkdir(root.c_str(), 0700);
  if (DIR* d = opendir(root.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') previous_links_.push_back(root + "/" + e->d_name);
    closedir(d);
  }
  std::string mine = root + "/" + std::to_string(boot_time_ns());
  if (mkdir(mine.c_str(), 0700) != 0) {
    std::fprintf(stderr, "vigil-agent: %s: links not pinned (%s: %s)\n", set_.c_str(), mine.c_str(),
                 errno_reason(errno).c_str());
    return;
  }
  pin_dir_ = mine;
  if (!previous_links_.empty())
    std::fprintf(stderr, "vigil-agent: %s: %zu previous agents' pinned links kept running until this one has attached\n",
                 set_.c_str(), previous_links_.size());
}

void UprobeSet::release_previous_links() {
  for (const auto& dir : previous_links_) {
    int n = remove_pins(dir);
    std::fprintf(stderr, "vigil-agent: %s: released %d pinned links of a previous agent (%s)\n", set_.c_str(), n,
                 dir.c_str());
  }
  previous_links_.clear();
}

}  // namespace vigil::agent
