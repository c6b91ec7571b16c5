// Kubernetes names (namespace, pod, container) for a container id, resolved on the node from the
// kubelet's /var/log/containers: every kubelet, whatever its runtime, links each container's log
// there as <pod>_<namespace>_<container>-<container id>.log (the names log shippers read too).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace vigil::agent {

struct PodNames {
  std::string namespace_name, pod, container;
};

// The names in one /var/log/containers file name, and its container id; nullopt when the name is
// not of that form. Kubernetes names cannot contain '_', so the split is unambiguous.
std::optional<std::pair<std::string, PodNames>> parse_container_log_name(const std::string& file);

class PodNameIndex {
 public:
  // `dir`: the kubelet's container log directory as mounted here ("" turns the lookup off).
  explicit PodNameIndex(std::string dir) : dir_(std::move(dir)) {}

  // Names for a 64-hex container id; an unknown id re-reads the directory, at most once a second
  // (a container started since the last read). Empty names where the node has no such file.
  PodNames lookup(const std::string& container_id);

 private:
  void reread_locked();
  std::string dir_;
  std::mutex mu_;
  std::unordered_map<std::string, PodNames> by_id_;
  std::chrono::steady_clock::time_point last_read_{};
  bool read_once_ = false;
};

}  // namespace vigil::agent
