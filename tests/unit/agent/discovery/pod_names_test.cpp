// Namespace, pod and container names from the kubelet's /var/log/containers, on a laid-out tree.
#include "discovery/pod_names.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

namespace vigil::agent {
namespace {

const std::string kId = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kId2 = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

TEST(PodNames, ParsesTheKubeletsLinkName) {
  // As a kubelet writes it: a pod name with dots and dashes (a StatefulSet's), a namespace.
  auto parsed = parse_container_log_name("vigil-worker-0_inference-prod_worker-" + kId + ".log");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->first, kId);
  EXPECT_EQ(parsed->second.pod, "vigil-worker-0");
  EXPECT_EQ(parsed->second.namespace_name, "inference-prod");
  EXPECT_EQ(parsed->second.container, "worker");
  parsed = parse_container_log_name("web.v2-7d4f_default_nginx-" + kId + ".log");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->second.pod, "web.v2-7d4f");
}

TEST(PodNames, RefusesWhatIsNotOne) {
  for (const std::string& bad : std::vector<std::string>{"kube-apiserver.log", "pod_ns_c-" + kId + ".txt", "pod_ns_c-" + kId.substr(1) + ".log",
                                "pod_c-" + kId + ".log", "a_b_c_d-" + kId + ".log", "pod_ns_c_" + kId + ".log",
                                "__c-" + kId + ".log", "pod_ns_c-" + std::string(64, 'A') + ".log"}) {
    EXPECT_FALSE(parse_container_log_name(bad)) << bad;
  }
}

TEST(PodNames, IndexReadsTheDirectoryAndFindsLaterContainers) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("vigil-pod-names-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / ("vigil-worker-0_inference_worker-" + kId + ".log")) << "";
  std::ofstream(dir / "not-a-container.log") << "";
  PodNameIndex index(dir.string());
  PodNames n = index.lookup(kId);
  EXPECT_EQ(n.namespace_name, "inference");
  EXPECT_EQ(n.pod, "vigil-worker-0");
  EXPECT_EQ(n.container, "worker");
  EXPECT_EQ(index.lookup(kId2).pod, "");  // not there yet
  std::ofstream(dir / ("trainer-1_ml_main-" + kId2 + ".log")) << "";
  sleep(1);  // an unknown id re-reads at most once a second
  EXPECT_EQ(index.lookup(kId2).pod, "trainer-1");
  EXPECT_EQ(index.lookup("").pod, "");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(PodNameIndex((dir / "missing").string()).lookup(kId).pod, "");  // not a Kubernetes node
}

}  // namespace
}  // namespace vigil::agent
