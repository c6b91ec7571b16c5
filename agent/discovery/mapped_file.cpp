// Opening a workload's file safely. The map_files link is followed by the kernel to the mapped
// file itself (fs/proc/base.c map_files_get_link: the vma's file_user_path), never through the
// workload's root or symlinks. It is first opened O_PATH, which opens nothing (a FIFO does not
// block, a device's open() does not run), checked, then reopened for reading through
// /proc/self/fd: the same inode, whatever happens to names meanwhile.
#include "discovery/mapped_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace vigil::agent {

const char* refusal_name(Refusal r) {
  switch (r) {
    case Refusal::kNone: return "none";
    case Refusal::kGone: return "gone";
    case Refusal::kOpenFailed: return "open_failed";
    case Refusal::kNotRegular: return "not_regular";
    case Refusal::kInodeMismatch: return "inode_mismatch";
    case Refusal::kFuse: return "fuse";
    case Refusal::kMapsTooLarge: return "maps_too_large";
    case Refusal::kTooManyFiles: return "too_many_files";
  }
  return "other";
}

MappedFile::MappedFile(int fd) : fd_(fd) {}

MappedFile::~MappedFile() {
  if (fd_ >= 0) close(fd_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

std::string MappedFile::path() const { return "/proc/self/fd/" + std::to_string(fd_); }

MappedFile open_mapped_file(const std::string& link, dev_t dev, ino_t inode, Refusal& why) {
  MappedFile handle(open(link.c_str(), O_PATH | O_CLOEXEC));
  if (!handle.is_open()) {
    why = errno == ENOENT || errno == ESRCH ? Refusal::kGone : Refusal::kOpenFailed;
    return {};
  }
  struct stat st {};
  if (fstat(handle.fd(), &st) != 0) {
    why = Refusal::kOpenFailed;
    return {};
  }
  if (!S_ISREG(st.st_mode)) {
    why = Refusal::kNotRegular;
    return {};
  }
  if (st.st_dev != dev || st.st_ino != inode) {
    why = Refusal::kInodeMismatch;
    return {};
  }
  MappedFile file(open(handle.path().c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!file.is_open()) {
    why = Refusal::kOpenFailed;
    return {};
  }
  struct statfs fs {};
  if (fstatfs(file.fd(), &fs) == 0 && fs.f_type == FUSE_SUPER_MAGIC) {
    why = Refusal::kFuse;
    return {};
  }
  why = Refusal::kNone;
  return file;
}

}  // namespace vigil::agent
