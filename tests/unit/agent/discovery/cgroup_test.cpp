// Container id and pod uid from cgroup paths written by the systemd and cgroupfs drivers.
#include "discovery/cgroup.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

const std::string kId = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

TEST(Cgroup, SystemdKubepods) {
  auto id = parse_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_0000_4111_8222_123456789abc.slice/cri-containerd-" + kId + ".scope\n");
  EXPECT_EQ(id.container_id, kId);
  EXPECT_EQ(id.pod_uid, "1b2c3d4e-0000-4111-8222-123456789abc");
}

TEST(Cgroup, CgroupfsDriverV1) {
  auto id = parse_cgroup("12:memory:/kubepods/besteffort/pod1b2c3d4e-0000-4111-8222-123456789abc/" + kId + "\n11:cpu:/\n");
  EXPECT_EQ(id.container_id, kId);
  EXPECT_EQ(id.pod_uid, "1b2c3d4e-0000-4111-8222-123456789abc");
}

TEST(Cgroup, DockerWithoutPod) {
  auto id = parse_cgroup("0::/system.slice/docker-" + kId + ".scope\n");
  EXPECT_EQ(id.container_id, kId);
  EXPECT_EQ(id.pod_uid, "");
}

TEST(Cgroup, HostProcess) {
  auto id = parse_cgroup("0::/user.slice/user-0.slice/session-1.scope\n");
  EXPECT_EQ(id.container_id, "");
  EXPECT_EQ(id.pod_uid, "");
}

}  // namespace
}  // namespace vigil::agent
