// Pinned state on bpffs. Directories are created one level at a time because libbpf's pin only
// creates the last one (make_parent_dir in libbpf.c); the uninstall walks the tree bottom-up.
// Each agent holds a shared flock(2) on its schema version's directory for its whole life; another
// version's directory is removed only when an exclusive flock on it is granted: no agent of that
// version runs (flock, not a pid in a map: the kernel releases it at any exit, and a pid can be reused).
#include "probes/pinned_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "probes/bpf_util.h"

namespace vigil::agent {
namespace {

constexpr long kBpfFsMagic = 0xcafe4a11;  // BPF_FS_MAGIC, linux/magic.h
const std::string kBpfFs = "/sys/fs/bpf";

bool is_bpffs(const std::string& path) {
  struct statfs st {};
  return statfs(path.c_str(), &st) == 0 && static_cast<long>(st.f_type) == kBpfFsMagic;
}

// True when it made the directory, false when it was there.
bool make_dir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) == 0) return true;
  if (errno != EEXIST) throw std::runtime_error("mkdir " + path + ": " + errno_reason(errno));
  return false;
}

// Removes PATH and what lies under it; counts the pins (non-directories) removed.
int remove_tree(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return errno == ENOENT ? 0 : -errno;
  if (!S_ISDIR(st.st_mode)) return unlink(path.c_str()) == 0 ? 1 : -errno;
  int removed = 0;
  if (DIR* d = opendir(path.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    closedir(d);
    for (const auto& n : names) {
      int r = remove_tree(path + "/" + n);
      if (r < 0) return r;
      removed += r;
    }
  }
  return rmdir(path.c_str()) == 0 ? removed : -errno;
}

// "v<kPinSchema>", appended rather than "v" + to_string(): GCC 12 at -O3 warns falsely on the
// latter (-Wrestrict, GCC bug 105329), which fails Release builds.
std::string schema_name() {
  std::string name = "v";
  name += std::to_string(kPinSchema);
  return name;
}

// This agent's shared flock on ROOT/v<kPinSchema>, held until it exits (the kernel drops it at
// any exit, SIGKILL included): while an agent of a version runs, that version's pins stay.
int schema_lease = -1;

// Removes the pins of every other schema version under ROOT that no agent holds (an exclusive
// flock granted: none has it shared); returns what happened, for the log line.
std::string remove_free_versions(const std::string& root) {
  std::string said;
  DIR* d = opendir(root.c_str());
  if (!d) return said;
  std::vector<std::string> versions;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 1 && n[0] == 'v' && n.find_first_not_of("0123456789", 1) == std::string::npos &&
        n != schema_name())
      versions.push_back(n);
  }
  closedir(d);
  for (const auto& v : versions) {
    const std::string dir = root + "/" + v;
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    said += "; ";
    said += v;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      const int n = remove_tree(dir);
      said += n < 0 ? ": not removed (" : ": ";
      said += n < 0 ? errno_reason(-n) + ")" : std::to_string(n) + " pins removed, no agent of it runs";
    } else {
      said += ": kept, an agent of it runs (the next agent to start after it removes them)";
    }
    close(fd);
  }
  return said;
}

}  // namespace

std::string make_pin_dir(const std::string& root, const std::string& set) {
  if (root.compare(0, kBpfFs.size(), kBpfFs) == 0 && !is_bpffs(kBpfFs) &&
      mount("bpf", kBpfFs.c_str(), "bpf", 0, "mode=0700") != 0)
    throw std::runtime_error("mount bpffs at " + kBpfFs + ": " + errno_reason(errno));
  std::string path;
  std::stringstream parts(root.substr(1));
  for (std::string part; std::getline(parts, part, '/');)
    if (!part.empty()) make_dir(path += "/" + part);
  const std::string version = schema_name();
  const bool created = make_dir(path += "/" + version);
  if (!is_bpffs(path)) throw std::runtime_error(path + " is not on a bpffs mount");
  if (schema_lease < 0) {
    schema_lease = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (schema_lease < 0 || flock(schema_lease, LOCK_SH) != 0)
      throw std::runtime_error("lock " + path + ": " + errno_reason(errno));
    const std::string others = remove_free_versions(path.substr(0, path.rfind('/')));
    if (created || !others.empty())
      std::fprintf(stderr, "vigil-agent: pinned state: schema %s in %s%s%s\n", version.c_str(), path.c_str(),
                   created ? " (new)" : "", others.c_str());
  }
  make_dir(path += "/" + set);
  if (!is_bpffs(path)) throw std::runtime_error(path + " is not on a bpffs mount");
  return path;
}

std::string set_pin_dir(const std::string& root, const std::string& set) {
  if (root.empty()) return "";
  try {
    return make_pin_dir(root, set);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "vigil-agent: %s: state not pinned, a restart loses it: %s\n", set.c_str(), e.what());
    return "";
  }
}

int pin_maps(bpf_object* obj, const std::string& dir, const std::vector<const char*>& names) {
  for (const char* name : names) {
    bpf_map* map = bpf_object__find_map_by_name(obj, name);
    if (!map) return -ENOENT;
    if (int err = bpf_map__set_pin_path(map, (dir + "/" + name).c_str())) return err;
  }
  return 0;
}

bool load_with_pins(const std::string& set, const std::string& pin_dir,
                    const std::function<int(const std::string& pin_dir)>& load) {
  int err = load(pin_dir);
  if (err == 0) return !pin_dir.empty();
  if (pin_dir.empty()) throw std::runtime_error("load " + set + ".bpf.o: " + errno_reason(err));
  std::fprintf(stderr,
               "vigil-agent: %s: the maps pinned in %s do not match this build (%s): not reused, "
               "counting from now; vigil-agent --cleanup removes them\n",
               set.c_str(), pin_dir.c_str(), errno_reason(err).c_str());
  if ((err = load(""))) throw std::runtime_error("load " + set + ".bpf.o: " + errno_reason(err));
  return false;
}

int remove_pins(const std::string& root) {
  struct stat st {};
  if (lstat(root.c_str(), &st) != 0) return errno == ENOENT ? 0 : -errno;
  if (!is_bpffs(root)) return -ENOTDIR;  // never walk a tree that is not bpffs: only pins go
  return remove_tree(root);
}

uint64_t boot_time_ns() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t process_start_ns(const std::string& proc_root, uint32_t pid) {
  std::ifstream f(proc_root + "/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(f, text);  // one line
  // comm may hold spaces and ')': the fields after it start at the last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) {
      long tick = sysconf(_SC_CLK_TCK);
      unsigned long long ticks = std::strtoull(field.c_str(), nullptr, 10);
      return tick > 0 ? ticks * (1000000000ull / static_cast<uint64_t>(tick)) : 0;
    }
  return 0;
}

}  // namespace vigil::agent
