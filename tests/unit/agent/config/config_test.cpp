// Config parser: defaults, every knob, and errors that name the key and its line.
#include "config/config.h"

#include <set>
#include <string>

#include "sets/registry.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

TEST(Config, EmptyMeansDefaults) {
  Config c = parse_config("");
  EXPECT_EQ(c.listen_host, "0.0.0.0");
  EXPECT_EQ(c.listen_port, 9435);
  EXPECT_TRUE(c.probes.tcp && c.probes.cuda && c.probes.nccl);
  EXPECT_EQ(c.fragmentation_window, std::chrono::minutes(5));
  EXPECT_EQ(stall_limit(c), std::chrono::seconds(33));  // 3 x poll_interval + 30 s
}

TEST(Config, EveryKnob) {
  Config c = parse_config(R"(listen: "127.0.0.1:9999"
kernel_btf: /tmp/vmlinux
poll_interval: 250ms
grace_period: 2m
housekeeping_stall_limit: 45s
probes: {tcp: false, cuda: true, nccl: off, usdt: no, xid: false, disable: ["cuda:cuGraphLaunch", "usdt:pytorch:malloc"]}
bpf_stats: off
discovery_interval: 30s
libraries:
  discover: false
  cuda: [/opt/a/libcuda.so.1]
  nccl: [/opt/b/libnccl.so.2]
  usdt: [/opt/c/libc10_cuda.so]
windows: {fragmentation: 30s}
tcp: {top_peers: 3}
)");
  EXPECT_EQ(c.listen_host, "127.0.0.1");
  EXPECT_EQ(c.listen_port, 9999);
  EXPECT_EQ(c.kernel_btf, "/tmp/vmlinux");
  EXPECT_EQ(c.poll_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(c.grace_period, std::chrono::minutes(2));
  EXPECT_EQ(stall_limit(c), std::chrono::seconds(45));
  EXPECT_FALSE(c.probes.tcp);
  EXPECT_FALSE(c.probes.nccl);
  EXPECT_FALSE(c.probes.usdt);
  EXPECT_FALSE(c.probes.xid);
  EXPECT_EQ(c.probes.disabled_in("cuda"), std::set<std::string>{"cuGraphLaunch"});
  EXPECT_EQ(c.probes.disabled_in("usdt"), std::set<std::string>{"pytorch:malloc"});
  EXPECT_TRUE(c.probes.disabled_in("cud").empty());
  EXPECT_FALSE(c.bpf_stats);
  EXPECT_EQ(c.discovery_interval, std::chrono::seconds(30));
  ASSERT_EQ(c.libraries.usdt.size(), 1u);
  EXPECT_FALSE(c.libraries.discover);
  ASSERT_EQ(c.libraries.cuda.size(), 1u);
  EXPECT_EQ(c.libraries.nccl[0], "/opt/b/libnccl.so.2");
  EXPECT_EQ(c.fragmentation_window, std::chrono::seconds(30));
  EXPECT_EQ(c.tcp_top_peers, 3);
}

void expect_error(const std::string& yaml, const std::string& key, int line) {
  try {
    parse_config(yaml);
    FAIL() << "no error for " << yaml;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_EQ(e.line(), line) << e.what();
  }
}

TEST(Config, UnknownKeyNamedWithLine) {
  expect_error("listen: 0.0.0.0:1\nprobes:\n  tcp: true\n  gpu: true\n", "probes.gpu", 4);
  expect_error("colour: blue\n", "colour", 1);
}

TEST(Config, BadValuesNamedWithLine) {
  expect_error("listen: nowhere\n", "listen", 1);
  expect_error("listen: host:99999\n", "listen", 1);
  expect_error("\npoll_interval: soon\n", "poll_interval", 2);
  expect_error("grace_period: 0s\n", "grace_period", 1);
  expect_error("housekeeping_stall_limit: 0s\n", "housekeeping_stall_limit", 1);
  expect_error("tcp:\n  top_peers: -1\n", "tcp.top_peers", 2);
  expect_error("probes: {tcp: maybe}\n", "probes.tcp", 1);
  expect_error("libraries: {cuda: [relative/libcuda.so.1]}\n", "libraries.cuda", 1);
  expect_error("probes: [tcp]\n", "probes", 1);
  expect_error("probes:\n  disable:\n    - cuGraphLaunch\n", "probes.disable", 3);
  expect_error("probes: {disable: [\"cuda:\"]}\n", "probes.disable", 1);
  expect_error("probes: {disable: tcp:tcp_sendmsg_locked}\n", "probes.disable", 1);
  expect_error("bpf_stats: sometimes\n", "bpf_stats", 1);
}

// Names are checked against the probes the sets really have, with the known ones in the error.
TEST(Config, DisabledProbesMustExist) {
  EXPECT_NO_THROW(check_disabled_probes(parse_config(
      R"(probes: {disable: ["tcp:tcp_sendmsg_locked", "cuda:cuGraphLaunch", "nccl:ncclAllReduce", "usdt:vigil:alloc_block_free"]})")
                                            .probes));
  try {
    check_disabled_probes(parse_config(R"(probes: {disable: ["tcp:tcp_sendmsg"]})").probes);
    FAIL() << "no error for tcp:tcp_sendmsg";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "probes.disable");
    EXPECT_NE(std::string(e.what()).find("inet_sock_set_state"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_disabled_probes(parse_config(R"(probes: {disable: ["xid:nvidia_dev_xid"]})").probes),
               ConfigError);
}

TEST(Config, ListenFlagParsing) {
  Config c;
  apply_listen(c, "[::1]:8080", "--listen", 0);
  EXPECT_EQ(c.listen_host, "::1");
  EXPECT_EQ(c.listen_port, 8080);
  EXPECT_THROW(apply_listen(c, ":80", "--listen", 0), ConfigError);
}

}  // namespace
}  // namespace vigil::agent
