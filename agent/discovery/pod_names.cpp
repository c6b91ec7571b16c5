// Container id -> namespace, pod, container from the kubelet's container log links.
#include "discovery/pod_names.h"

#include <dirent.h>

#include <cctype>

namespace vigil::agent {

std::optional<std::pair<std::string, PodNames>> parse_container_log_name(const std::string& file) {
  constexpr size_t kIdLen = 64;
  const std::string suffix = ".log";
  if (file.size() < kIdLen + suffix.size() + 6 || file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const std::string stem = file.substr(0, file.size() - suffix.size());
  const std::string id = stem.substr(stem.size() - kIdLen);
  for (char c : id)
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) return std::nullopt;
  if (stem[stem.size() - kIdLen - 1] != '-') return std::nullopt;
  const std::string names = stem.substr(0, stem.size() - kIdLen - 1);
  const size_t first = names.find('_');
  const size_t second = first == std::string::npos ? first : names.find('_', first + 1);
  if (second == std::string::npos || names.find('_', second + 1) != std::string::npos) return std::nullopt;
  PodNames n{names.substr(first + 1, second - first - 1), names.substr(0, first), names.substr(second + 1)};
  if (n.namespace_name.empty() || n.pod.empty() || n.container.empty()) return std::nullopt;
  return std::make_pair(id, n);
}

void PodNameIndex::reread_locked() {
  last_read_ = std::chrono::steady_clock::now();
  read_once_ = true;
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return;  // not a Kubernetes node (or not mounted): no names, no error
  by_id_.clear();
  while (const dirent* e = readdir(d)) {
    if (auto parsed = parse_container_log_name(e->d_name)) by_id_[parsed->first] = parsed->second;
  }
  closedir(d);
}

PodNames PodNameIndex::lookup(const std::string& container_id) {
  if (dir_.empty() || container_id.empty()) return {};
  std::lock_guard lock(mu_);
  auto it = by_id_.find(container_id);
  if (it != by_id_.end()) return it->second;
  if (!read_once_ || std::chrono::steady_clock::now() - last_read_ >= std::chrono::seconds(1)) {
    reread_locked();
    it = by_id_.find(container_id);
    if (it != by_id_.end()) return it->second;
  }
  return {};
}

}  // namespace vigil::agent
