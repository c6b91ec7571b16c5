// The tensor-parallel group collector renders hand-made snapshots of collective.bpf.c's maps: a
// series per worker in a group (the group's own numbering, its id as "tp-" and 16 hex digits),
// none for a worker in no group, without root or a kernel.
#include "collectors/tp_group_collector.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "probes/tcp_maps.h"  // monotonic_ns
#include "rendered_families.h"

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

class FakeCollective : public CollectiveReader {
 public:
  CollectiveSnapshot read() const override { return snapshot; }
  CollectiveSnapshot snapshot;
};

collective_group group(uint64_t id, uint64_t seq, uint32_t rank, uint64_t last_begin_ns) {
  collective_group g{};
  g.group_id = id;
  g.seq = seq;
  g.rank = rank;
  g.nranks = 2;
  g.last_begin_ns = last_begin_ns;
  return g;
}

collective_proc worker() {
  collective_proc p{};
  std::strncpy(p.comm, "vigil-worker", sizeof p.comm - 1);
  return p;
}

TEST(TpGroupCollector, RendersEachRankOfAGroupWithItsId) {
  ProcessTable processes{std::filesystem::temp_directory_path().string() + "/vigil-no-proc", 30ms};
  FakeCollective maps;
  const uint64_t now = monotonic_ns();
  maps.snapshot.procs = {{100, worker()}, {101, worker()}, {102, worker()}, {103, worker()}};  // 103: in no group
  maps.snapshot.groups = {{100, group(0x00ab00000000cdefULL, 41, 0, now - 2'000'000'000)},
                          {101, group(0x00ab00000000cdefULL, 40, 1, now - 500'000'000)},
                          {102, group(0x77, 1, 2, now)}};  // rank 2 of 2: a workload's numbers, not a group's
  TpGroupCollector c(maps, processes);
  const auto fs = c.Collect();

  const auto& entered = family(fs, "tp_comm_collectives_total").metric;
  ASSERT_EQ(entered.size(), 2u);
  EXPECT_EQ(label(entered[0], "pid"), "100");
  EXPECT_EQ(label(entered[0], "communicator"), "tp-00ab00000000cdef");  // never an NCCL id
  EXPECT_EQ(label(entered[0], "comm"), "vigil-worker");
  EXPECT_EQ(label(entered[0], "rank"), "0");
  EXPECT_EQ(label(entered[0], "nranks"), "2");
  EXPECT_EQ(entered[0].counter.value, 42);  // sequence numbers count from 0
  EXPECT_EQ(label(entered[1], "rank"), "1");
  EXPECT_EQ(entered[1].counter.value, 41);

  const auto& age = family(fs, "tp_comm_last_collective_age_seconds").metric;
  ASSERT_EQ(age.size(), 2u);
  EXPECT_GE(age[0].gauge.value, 2.0);
  EXPECT_LT(age[0].gauge.value, 60.0);
  EXPECT_GE(age[1].gauge.value, 0.5);
  EXPECT_LT(age[1].gauge.value, age[0].gauge.value);
}

}  // namespace
}  // namespace vigil::agent
