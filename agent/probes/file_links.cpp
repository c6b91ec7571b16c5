#include "probes/file_links.h"

#include <cstdio>

namespace vigil::agent {

FileLinks::~FileLinks() {
  for (const auto& [id, f] : files_) stats_.add_attached(set_, -static_cast<int>(f.links.size()));
}

std::pair<FileLinks::File&, bool> FileLinks::seen(FileId id) {
  auto [it, added] = files_.try_emplace(id);
  it->second.last_mapped = Clock::now();
  return {it->second, added};
}

int FileLinks::sites_held() const {
  int n = 0;
  for (const auto& [id, f] : files_) n += f.sites;
  return n;
}

void FileLinks::release_unmapped(const std::set<FileId>& mapped, std::chrono::milliseconds grace) {
  const auto now = Clock::now();
  for (auto it = files_.begin(); it != files_.end();) {
    File& f = it->second;
    if (mapped.count(it->first)) f.last_mapped = now;
    if (f.pinned || now - f.last_mapped < grace) {
      ++it;
      continue;
    }
    if (!f.links.empty())
      std::fprintf(stderr, "vigil-agent: %s: no process maps %s any more; detaching its %zu probes\n", set_.c_str(),
                   f.name.c_str(), f.links.size());
    stats_.add_attached(set_, -static_cast<int>(f.links.size()));
    it = files_.erase(it);
  }
}

}  // namespace vigil::agent
