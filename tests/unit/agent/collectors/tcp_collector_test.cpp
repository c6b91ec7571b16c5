// The TCP collector renders hand-made snapshots of tcp.bpf.c's maps: what series a node pays
// for (top peers then "other", retired resets kept then dropped, zero counters absent), without
// root or a kernel.
#include "collectors/tcp_collector.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "rendered_families.h"

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

class FakeTcp : public TcpReader {
 public:
  TcpSnapshot read() const override { return snapshot; }
  TcpSnapshot snapshot;
};

// PID's counters towards IPV4 (nullptr: the kernel's "other", family 0).
std::pair<tcp_peer_key, tcp_peer_val> row(uint32_t pid, const char* ipv4, uint64_t retrans, uint64_t sent = 0,
                                          uint64_t received = 0, const char* comm = "trainer") {
  tcp_peer_key k{};
  k.tgid = pid;
  if (ipv4) {
    k.family = AF_INET;
    inet_pton(AF_INET, ipv4, k.daddr);
  }
  tcp_peer_val v{};
  v.retrans_segs = retrans;
  v.resets_sent = sent;
  v.resets_received = received;
  std::strncpy(v.comm, comm, sizeof v.comm - 1);
  return {k, v};
}

// Family NAME's values by the value of label KEY.
std::map<std::string, double> values_by(const std::vector<prometheus::MetricFamily>& fs, const std::string& name,
                                        const std::string& key) {
  std::map<std::string, double> out;
  for (const auto& m : family(fs, name).metric) out[label(m, key)] = m.counter.value;
  return out;
}

// No /proc of these pids: labels fall back to the kernel's comm.
class TcpCollectorTest : public ::testing::Test {
 protected:
  ProcessTable processes_{std::filesystem::temp_directory_path().string() + "/vigil-no-proc", 30ms};
  FakeTcp tcp_;
};

TEST_F(TcpCollectorTest, TopPeersThenOtherAndZeroCountersAbsent) {
  tcp_.snapshot.peers[100] = {row(100, "10.0.0.1", 10), row(100, "10.0.0.2", 5), row(100, "10.0.0.3", 1),
                              row(100, nullptr, 4)};
  tcp_.snapshot.peers[200] = {row(200, "10.0.0.9", 0, 1, 0, "client")};  // resets only
  TcpCollector c(tcp_, 2, processes_);
  const auto fs = c.Collect();

  const auto retrans = values_by(fs, "tcp_retransmits_total", "peer");
  EXPECT_EQ(retrans, (std::map<std::string, double>{{"10.0.0.1", 10}, {"10.0.0.2", 5}, {"other", 5}}));
  for (const auto& m : family(fs, "tcp_retransmits_total").metric) EXPECT_EQ(label(m, "pid"), "100");
  EXPECT_TRUE(family(fs, "tcp_synack_retransmits_total").metric.empty());  // no SYN-ACK retransmit: no series
  EXPECT_TRUE(family(fs, "tcp_rto_seconds").metric.empty());               // no timer state: no series
  // Resets per program, both directions of a program that has any; none for trainer.
  const auto& resets = family(fs, "tcp_resets_total").metric;
  ASSERT_EQ(resets.size(), 2u);
  for (const auto& m : resets) {
    EXPECT_EQ(label(m, "comm"), "client");
    EXPECT_EQ(label(m, "pid"), "<none>");
    EXPECT_EQ(m.counter.value, label(m, "direction") == "sent" ? 1 : 0);
  }

  // A chosen peer keeps its series; a busier newcomer past the top goes to "other".
  tcp_.snapshot.peers[100].push_back(row(100, "10.0.0.4", 50));
  const auto again = values_by(c.Collect(), "tcp_retransmits_total", "peer");
  EXPECT_EQ(again, (std::map<std::string, double>{{"10.0.0.1", 10}, {"10.0.0.2", 5}, {"other", 55}}));
}

TEST_F(TcpCollectorTest, RetiredResetsKeptThenDroppedAfterTheGrace) {
  tcp_.snapshot.peers[300] = {row(300, "10.0.0.5", 1, 2, 3, "refused")};
  tcp_.snapshot.timers[300] = tcp_timer_state{};
  tcp_.snapshot.timers[300].rto_us = 200000;
  TcpCollector c(tcp_, 4, processes_);
  c.retire(tcp_.snapshot, {300});
  // Before the owner forgets it, a scrape counts the retired process once, not twice.
  auto resets = values_by(c.Collect(), "tcp_resets_total", "direction");
  EXPECT_EQ(resets, (std::map<std::string, double>{{"sent", 2}, {"received", 3}}));
  tcp_.snapshot = {};  // forgotten
  const auto fs = c.Collect();
  resets = values_by(fs, "tcp_resets_total", "direction");
  EXPECT_EQ(resets, (std::map<std::string, double>{{"sent", 2}, {"received", 3}}));
  EXPECT_TRUE(family(fs, "tcp_retransmits_total").metric.empty());  // per process: gone with it
  EXPECT_TRUE(family(fs, "tcp_rto_seconds").metric.empty());

  std::this_thread::sleep_for(40ms);  // past the grace with no member left
  c.retire(tcp_.snapshot, {});
  EXPECT_TRUE(family(c.Collect(), "tcp_resets_total").metric.empty());
}

TEST_F(TcpCollectorTest, RetiredResetsAddToALiveMemberOfTheGroup) {
  tcp_.snapshot.peers[400] = {row(400, "10.0.0.6", 0, 1, 0, "worker")};
  tcp_.snapshot.peers[401] = {row(401, "10.0.0.6", 0, 2, 0, "worker")};
  TcpCollector c(tcp_, 4, processes_);
  c.retire(tcp_.snapshot, {400});
  tcp_.snapshot.peers.erase(400);
  std::this_thread::sleep_for(40ms);
  c.retire(tcp_.snapshot, {});  // 401 still lives: the group stays, with 400's count in it
  EXPECT_EQ(values_by(c.Collect(), "tcp_resets_total", "direction")["sent"], 3);
}

// Segments settled at close (the kernel ran no program of ours for their events) are one series,
// there at 0 too: the agent's own account of what its events missed.
TEST_F(TcpCollectorTest, SettledRetransmitsAlwaysOneSeries) {
  TcpCollector c(tcp_, 2, processes_);
  ASSERT_EQ(family(c.Collect(), "vigil_agent_tcp_settled_retransmits_total").metric.size(), 1u);
  EXPECT_EQ(family(c.Collect(), "vigil_agent_tcp_settled_retransmits_total").metric[0].counter.value, 0);
  tcp_.snapshot.settled_segs = 3;
  EXPECT_EQ(family(c.Collect(), "vigil_agent_tcp_settled_retransmits_total").metric[0].counter.value, 3);
}

TEST(TcpMapsHelpers, StallSecondsOnlyWhileTimeoutsGoOn) {
  tcp_timer_state s{};
  s.rto_us = 1000000;
  s.ts_ns = 10'000'000'000ULL;
  EXPECT_EQ(stall_seconds(s, 11'000'000'000ULL), 0);  // no run of timeouts
  s.stall_start_ns = 4'000'000'000ULL;
  EXPECT_EQ(stall_seconds(s, 11'000'000'000ULL), 7);
  EXPECT_EQ(stall_seconds(s, 20'000'000'000ULL), 0);  // long past the next timeout: progress
  uint8_t addr[16] = {10, 0, 0, 7};
  EXPECT_EQ(address_text(AF_INET, addr), "10.0.0.7");
  EXPECT_EQ(address_text(0, addr), "unknown");
}

}  // namespace
}  // namespace vigil::agent
