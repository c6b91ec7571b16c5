// Receive queues of a process's TCP connections, from /proc (see unread_bytes.h).
#include "discovery/unread_bytes.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <unordered_set>

namespace vigil::agent {
namespace {

constexpr unsigned kEstablished = 1;  // TCP_ESTABLISHED, the "st" column

// The inodes of the sockets among the process's open files; false past the limit or when the
// process is gone.
bool socket_inodes(const std::string& fd_dir, std::unordered_set<uint64_t>& inodes) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(fd_dir.c_str()), closedir);
  if (!dir) return false;
  uint64_t seen = 0;
  char link[64];
  while (const dirent* e = readdir(dir.get())) {
    if (e->d_name[0] == '.') continue;
    if (++seen > kMaxUnreadScan) return false;
    const ssize_t n = readlinkat(dirfd(dir.get()), e->d_name, link, sizeof link - 1);
    if (n <= 0) continue;  // closed meanwhile
    link[n] = '\0';
    unsigned long long inode = 0;
    if (std::sscanf(link, "socket:[%llu]", &inode) == 1) inodes.insert(inode);
  }
  return true;
}

// Adds the rx_queue of the established sockets of INODES listed in the file at PATH (a missing
// file, e.g. tcp6 without IPv6, adds nothing); false past the limit.
bool add_queues(const std::string& path, const std::unordered_set<uint64_t>& inodes, uint64_t& lines,
                uint64_t& unread) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    if (++lines > kMaxUnreadScan) return false;
    // "sl local rem st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ..."
    unsigned st = 0;
    unsigned long tx = 0, rx = 0, inode = 0;
    if (std::sscanf(line.c_str(), " %*s %*s %*s %x %lx:%lx %*s %*s %*s %*s %lu", &st, &tx, &rx, &inode) != 4) continue;
    if (st == kEstablished && inodes.count(inode)) unread += rx;
  }
  return true;
}

}  // namespace

std::optional<uint64_t> unread_tcp_bytes(const std::string& proc_root, uint32_t pid) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  std::unordered_set<uint64_t> inodes;
  if (!socket_inodes(dir + "/fd", inodes)) return std::nullopt;
  uint64_t lines = 0, unread = 0;
  if (!add_queues(dir + "/net/tcp", inodes, lines, unread) || !add_queues(dir + "/net/tcp6", inodes, lines, unread))
    return std::nullopt;
  return unread;
}

}  // namespace vigil::agent
