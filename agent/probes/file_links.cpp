#include "probes/file_links.h"

#include <unistd.h>

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

void FileLinks::keep_pinned_links() {
  for (auto& [id, f] : files_)
    if (!f.pin_dir.empty())
      for (auto& l : f.links) bpf_link__disconnect(l.get());
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
    if (!f.pin_dir.empty()) {  // unpinned first: the pin would keep them attached
      for (auto& l : f.links) bpf_link__unpin(l.get());
      rmdir(f.pin_dir.c_str());
    }
    it = files_.erase(it);
  }
}

}  // namespace vigil::agent
