// Container and pod identity from the text of /proc/PID/cgroup.
#pragma once

#include <string>

namespace vigil::agent {

struct ContainerIdentity {
  std::string container_id;  // 64 hex digits, empty when not in a container
  std::string pod_uid;       // Kubernetes pod UID with dashes, empty when not in a pod
};

ContainerIdentity parse_cgroup(const std::string& content);

}  // namespace vigil::agent
