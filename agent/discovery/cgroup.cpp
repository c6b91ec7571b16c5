// Container and pod identity from cgroup paths as systemd and cgroupfs drivers write them, e.g.
// /kubepods.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope
// and /kubepods/burstable/pod<uid>/<id>, /docker/<id>, /system.slice/docker-<id>.scope.
#include "discovery/cgroup.h"

#include <algorithm>
#include <cctype>

namespace vigil::agent {
namespace {

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(static_cast<unsigned char>(c)); }

// The last run of exactly 64 lowercase hex digits in the path: container runtimes name their
// cgroup after the container id, optionally prefixed ("docker-", "cri-containerd-", "crio-").
std::string find_container_id(const std::string& path) {
  std::string found;
  size_t i = 0;
  while (i < path.size()) {
    if (!is_hex(path[i])) { ++i; continue; }
    size_t j = i;
    while (j < path.size() && is_hex(path[j])) ++j;
    if (j - i == 64) found = path.substr(i, 64);
    i = j;
  }
  return found;
}

std::string find_pod_uid(const std::string& path) {
  auto pos = path.rfind("pod");
  while (pos != std::string::npos) {
    size_t start = pos + 3;
    size_t end = start;
    while (end < path.size() && (is_hex(path[end]) || path[end] == '-' || path[end] == '_')) ++end;
    if (end - start == 36) {
      std::string uid = path.substr(start, 36);
      std::replace(uid.begin(), uid.end(), '_', '-');
      return uid;
    }
    if (pos == 0) break;
    pos = path.rfind("pod", pos - 1);
  }
  return {};
}

}  // namespace

ContainerIdentity parse_cgroup(const std::string& content) {
  ContainerIdentity id;
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    std::string line = content.substr(start, end - start);
    start = end + 1;
    auto colon = line.find(':', line.find(':') + 1);
    if (colon == std::string::npos) continue;
    std::string path = line.substr(colon + 1);
    if (id.container_id.empty()) id.container_id = find_container_id(path);
    if (id.pod_uid.empty()) id.pod_uid = find_pod_uid(path);
  }
  return id;
}

}  // namespace vigil::agent
