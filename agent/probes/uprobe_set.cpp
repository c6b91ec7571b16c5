// Uprobes on a library's functions: attached for every process (pid -1) that maps the same file,
// so a library is probed once however many processes use it, and new processes are covered.
#include "probes/uprobe_set.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace vigil::agent {

UprobeSet::~UprobeSet() { stats_.add_attached(set_, -static_cast<int>(links_.size())); }

bool UprobeSet::attach_one(const std::string& path, const UprobeTarget& t, bool retprobe) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = t.cookie, .retprobe = retprobe,
              .func_name = t.symbol);
  Link link(bpf_program__attach_uprobe_opts(retprobe ? exit_ : enter_, -1, path.c_str(), 0, &opts));
  if (!link) {
    int err = errno;
    if (err == ENOENT && t.optional) return false;
    std::fprintf(stderr, "vigil-agent: %s: cannot attach %s%s in %s: %s\n", set_.c_str(),
                 retprobe ? "uretprobe " : "uprobe ", t.symbol, path.c_str(), errno_reason(err).c_str());
    stats_.attach_failure(set_, err == ENOENT ? "symbol_missing" : errno_reason(err));
    return false;
  }
  links_.push_back(std::move(link));
  return true;
}

int UprobeSet::attach(const std::string& path, dev_t dev, ino_t inode) {
  if (!done_.insert({dev, inode}).second) return 0;
  int n = 0;
  for (const auto& t : targets_) {
    // An entry probe without its return probe would leave calls half-seen: attach both or none.
    if (!attach_one(path, t, false)) continue;
    if (attach_one(path, t, true)) {
      n += 2;
    } else {
      links_.pop_back();
    }
  }
  stats_.add_attached(set_, n);
  std::fprintf(stderr, "vigil-agent: %s: %d probes attached in %s\n", set_.c_str(), n, path.c_str());
  return n;
}

int UprobeSet::attach(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    stats_.attach_failure(set_, "library_missing");
    std::fprintf(stderr, "vigil-agent: %s: library %s not found\n", set_.c_str(), path.c_str());
    return 0;
  }
  return attach(path, st.st_dev, st.st_ino);
}

}  // namespace vigil::agent
