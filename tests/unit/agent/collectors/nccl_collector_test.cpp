// The NCCL collector renders hand-made snapshots of nccl.bpf.c's maps: series only for processes
// the snapshot holds, calls summed into bytes by op, communicators past the kernel's table counted
// as untracked, without root or a kernel.
#include "collectors/nccl_collector.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "collectors/nccl_comm_id.h"
#include "rendered_families.h"
#include "../probes/fake_nccl_reader.h"

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

using test::FakeNccl;

nccl_proc proc(const char* comm, int64_t communicators) {
  nccl_proc p{};
  p.communicators = communicators;
  std::strncpy(p.comm, comm, sizeof p.comm - 1);
  return p;
}

class NcclCollectorTest : public ::testing::Test {
 protected:
  ProcessTable processes_{std::filesystem::temp_directory_path().string() + "/vigil-no-proc", 30ms};
  FakeNccl nccl_;
};

TEST_F(NcclCollectorTest, RendersOnlyProcessesOfTheSnapshot) {
  nccl_proc p = proc("trainer", 1);
  p.comms_refused = 2;
  nccl_.snapshot.procs = {{100, p}};
  nccl_comm_val v{};
  v.collectives = 7;
  v.rank = 1;
  v.nranks = 4;
  std::memset(v.id, 0xab, sizeof v.id);
  nccl_.snapshot.comms = {{{100, 0, 0x1000}, v}, {{999, 0, 0x2000}, v}};  // 999: not in procs
  nccl_.snapshot.calls = {{{100, NCCL_FN_ALL_REDUCE, 0, 0}, {3, 300}},
                          {{100, NCCL_FN_ALL_REDUCE, 5, 0}, {1, 0}},
                          {{999, NCCL_FN_ALL_REDUCE, 0, 0}, {9, 900}}};
  nccl_.snapshot.async = {{{100, 6}, 2}};
  NcclCollector c(nccl_, processes_);
  const auto fs = c.Collect();

  const auto& comm_calls = family(fs, "nccl_comm_collectives_total").metric;
  ASSERT_EQ(comm_calls.size(), 1u);
  EXPECT_EQ(label(comm_calls[0], "communicator"), nccl_comm_id(v.id, sizeof v.id));
  EXPECT_EQ(label(comm_calls[0], "rank"), "1");
  EXPECT_EQ(label(comm_calls[0], "nranks"), "4");
  EXPECT_EQ(comm_calls[0].counter.value, 7);
  // No collective entered yet: no age.
  EXPECT_TRUE(family(fs, "nccl_comm_last_collective_age_seconds").metric.empty());
  EXPECT_EQ(family(fs, "nccl_calls_total").metric.size(), 2u);  // success and error, pid 100 only
  const auto& bytes = family(fs, "nccl_bytes_total").metric;
  ASSERT_EQ(bytes.size(), 1u);
  EXPECT_EQ(label(bytes[0], "op"), "AllReduce");
  EXPECT_EQ(bytes[0].counter.value, 300);
  ASSERT_EQ(family(fs, "nccl_async_errors_total").metric.size(), 1u);
  EXPECT_EQ(family(fs, "nccl_comms_untracked_total").metric[0].counter.value, 2);
  EXPECT_EQ(family(fs, "nccl_communicators").metric[0].gauge.value, 1);
}

TEST_F(NcclCollectorTest, AForgottenProcessHasNoSeries) {
  nccl_.snapshot.procs = {{100, proc("trainer", 1)}};
  nccl_.snapshot.calls = {{{100, NCCL_FN_ALL_REDUCE, 0, 0}, {3, 300}}};
  NcclCollector c(nccl_, processes_);
  EXPECT_EQ(family(c.Collect(), "nccl_calls_total").metric.size(), 1u);
  nccl_.snapshot = {};  // the set had the owner forget it: the collector keeps nothing
  for (const auto& f : c.Collect()) EXPECT_TRUE(f.metric.empty()) << f.name;
}

}  // namespace
}  // namespace vigil::agent
