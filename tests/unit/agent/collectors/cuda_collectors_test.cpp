// The CUDA and allocator collectors render hand-made snapshots of cuda.bpf.c's and usdt.bpf.c's
// maps: what series a node pays for, without root or a kernel.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "collectors/allocator_collector.h"
#include "collectors/cuda_graph_collector.h"
#include "collectors/gpu_memory_collector.h"
#include "probes/cuda_result.h"
#include "rendered_families.h"

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

class FakeCuda : public CudaReader {
 public:
  CudaSnapshot read() const override { return snapshot; }
  CudaSnapshot snapshot;
};

class FakeUsdt : public UsdtReader {
 public:
  UsdtSnapshot read() const override { return snapshot; }
  UsdtSnapshot snapshot;
};

cuda_proc proc(const char* comm) {
  cuda_proc p{};
  std::strncpy(p.comm, comm, sizeof p.comm - 1);
  return p;
}

// The series of family NAME whose pid label is PID ("" for series without one).
std::vector<prometheus::ClientMetric> series(const std::vector<prometheus::MetricFamily>& fs, const std::string& name,
                                             const std::string& pid) {
  std::vector<prometheus::ClientMetric> out;
  for (const auto& m : family(fs, name).metric)
    if (label(m, "pid") == (pid.empty() ? "<none>" : pid)) out.push_back(m);
  return out;
}

// No /proc of these pids: labels fall back to the kernel's comm.
class CudaCollectors : public ::testing::Test {
 protected:
  ProcessTable processes_{std::filesystem::temp_directory_path().string() + "/vigil-no-proc", 30ms};
  FakeCuda cuda_;
};

TEST_F(CudaCollectors, GpuMemoryRendersLiveBytesAndLeavesZeroCountersOut) {
  cuda_proc p = proc("trainer");
  p.live_bytes = 1000;
  p.vmm_mapped_bytes = 24;
  p.allocs = 4;
  p.small_allocs = 1;
  cuda_proc idle = proc("idle");  // no allocation: no ratio, no untracked, no histogram group
  p.untracked_allocs = 2;
  cuda_.snapshot.procs = {{100, p}, {200, idle}};
  cuda_.snapshot.errors = {{{100, CUDA_FN_MEM_ALLOC, 2, 0}, 3},      // an allocation failure: counted
                           {{100, CUDA_FN_GRAPH_LAUNCH, 2, 0}, 5},   // not an allocation: not here
                           {{999, CUDA_FN_MEM_ALLOC, 2, 0}, 7}};     // no such process in the snapshot
  GpuMemoryCollector c(cuda_, 1min, processes_, 0);
  const auto fs = c.Collect();

  ASSERT_EQ(series(fs, "gpu_memory_live_bytes", "100").size(), 1u);
  EXPECT_EQ(series(fs, "gpu_memory_live_bytes", "100")[0].gauge.value, 1024);
  EXPECT_EQ(label(series(fs, "gpu_memory_live_bytes", "100")[0], "comm"), "trainer");
  EXPECT_EQ(series(fs, "gpu_memory_fragmentation_ratio", "100")[0].gauge.value, 0.25);
  EXPECT_TRUE(series(fs, "gpu_memory_fragmentation_ratio", "200").empty());
  EXPECT_EQ(series(fs, "gpu_memory_untracked_allocations_total", "100")[0].counter.value, 2);
  EXPECT_TRUE(series(fs, "gpu_memory_untracked_allocations_total", "200").empty());
  const auto failures = family(fs, "gpu_memory_allocation_failures_total").metric;
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(label(failures[0], "pid"), "100");
  EXPECT_EQ(label(failures[0], "error"), cuda_result_name(2));
  EXPECT_EQ(failures[0].counter.value, 3);
  EXPECT_EQ(family(fs, "gpu_memory_allocation_size_bytes").metric.size(), 1u);  // trainer's group only
}

TEST_F(CudaCollectors, GpuMemoryKeepsRetiredSizesThenDropsThemAfterTheGrace) {
  cuda_proc p = proc("client");
  p.allocs = 2;
  p.alloc_bytes = 3000;
  p.size_hist[11] = 2;
  cuda_.snapshot.procs = {{300, p}};
  GpuMemoryCollector c(cuda_, 1min, processes_, 0);
  c.sample(cuda_.snapshot);
  // The process is gone: the set retires it, forgets its kernel state, samples the rest.
  c.retire(300, p);
  cuda_.snapshot.procs.clear();
  c.sample(cuda_.snapshot);

  auto hist = family(c.Collect(), "gpu_memory_allocation_size_bytes").metric;
  ASSERT_EQ(hist.size(), 1u);  // kept: the group's counts do not go back
  EXPECT_EQ(label(hist[0], "comm"), "client");
  EXPECT_EQ(label(hist[0], "pid"), "<none>");
  EXPECT_EQ(hist[0].histogram.sample_count, 2u);
  EXPECT_EQ(hist[0].histogram.sample_sum, 3000);
  EXPECT_TRUE(series(c.Collect(), "gpu_memory_live_bytes", "300").empty());

  std::this_thread::sleep_for(40ms);  // past the grace with no member left
  c.sample(cuda_.snapshot);
  EXPECT_TRUE(family(c.Collect(), "gpu_memory_allocation_size_bytes").metric.empty());
}

// A scrape between the set's retire and its forget sees the process both retired and still in
// the maps: its sizes count once, and it is not rendered as a live process.
TEST_F(CudaCollectors, GpuMemoryScrapeBetweenRetireAndForgetCountsOnce) {
  cuda_proc p = proc("client");
  p.allocs = 2;
  p.alloc_bytes = 3000;
  p.size_hist[11] = 2;
  p.live_bytes = 100;
  cuda_.snapshot.procs = {{300, p}};
  GpuMemoryCollector c(cuda_, 1min, processes_, 0);
  c.sample(cuda_.snapshot);
  c.retire(300, p);  // the maps still hold 300: forget comes next

  auto fs = c.Collect();
  auto hist = family(fs, "gpu_memory_allocation_size_bytes").metric;
  ASSERT_EQ(hist.size(), 1u);
  EXPECT_EQ(hist[0].histogram.sample_count, 2u);
  EXPECT_EQ(hist[0].histogram.sample_sum, 3000);
  EXPECT_TRUE(series(fs, "gpu_memory_live_bytes", "300").empty());
  EXPECT_TRUE(series(fs, "gpu_memory_accounting_complete", "300").empty());

  cuda_.snapshot.procs.clear();  // forgotten; the tick samples what is left
  c.sample(cuda_.snapshot);
  hist = family(c.Collect(), "gpu_memory_allocation_size_bytes").metric;
  ASSERT_EQ(hist.size(), 1u);
  EXPECT_EQ(hist[0].histogram.sample_count, 2u);
}

TEST_F(CudaCollectors, GpuMemoryRetiredSizesAddToALiveMemberOfTheGroup) {
  cuda_proc a = proc("worker"), b = proc("worker");
  a.allocs = b.allocs = 1;
  a.size_hist[0] = b.size_hist[0] = 1;
  a.alloc_bytes = b.alloc_bytes = 1;
  cuda_.snapshot.procs = {{400, a}, {401, b}};
  GpuMemoryCollector c(cuda_, 1min, processes_, 0);
  c.retire(400, a);
  cuda_.snapshot.procs.erase(400);
  std::this_thread::sleep_for(40ms);
  c.sample(cuda_.snapshot);  // 401 still lives: the group stays, with 400's count in it
  auto hist = family(c.Collect(), "gpu_memory_allocation_size_bytes").metric;
  ASSERT_EQ(hist.size(), 1u);
  EXPECT_EQ(hist[0].histogram.sample_count, 2u);
}

TEST_F(CudaCollectors, GraphCollectorCountsOnlyCalledFunctionsAndKnownProcesses) {
  cuda_proc p = proc("infer");
  p.calls[CUDA_FN_GRAPH_LAUNCH] = 9;
  p.calls[CUDA_FN_MEM_ALLOC] = 4;
  cuda_.snapshot.procs = {{500, p}};
  cuda_.snapshot.errors = {{{500, CUDA_FN_GRAPH_LAUNCH, 2, 0}, 1},
                           {{500, CUDA_FN_STREAM_BEGIN_CAPTURE, 2, 0}, 2},
                           {{500, CUDA_FN_STREAM_END_CAPTURE, 2, 0}, 3},
                           {{777, CUDA_FN_GRAPH_LAUNCH, 2, 0}, 1}};
  CudaGraphCollector c(cuda_, processes_);
  const auto fs = c.Collect();
  EXPECT_EQ(series(fs, "cuda_driver_calls_total", "500").size(), 2u);  // zero-call functions absent
  EXPECT_EQ(series(fs, "cuda_graph_launches_total", "500")[0].counter.value, 9);
  EXPECT_EQ(series(fs, "cuda_graph_launch_failures_total", "500")[0].counter.value, 1);
  EXPECT_TRUE(series(fs, "cuda_graph_launch_failures_total", "777").empty());
  ASSERT_EQ(series(fs, "cuda_stream_capture_failures_total", "500").size(), 1u);  // begin + end summed
  EXPECT_EQ(series(fs, "cuda_stream_capture_failures_total", "500")[0].counter.value, 5);
  EXPECT_TRUE(family(fs, "cuda_graph_instantiate_failures_total").metric.empty());
}

TEST_F(CudaCollectors, AllocatorTakesPytorchReservedBytesFromTheDriverOnOneDevice) {
  FakeUsdt usdt;
  usdt_alloc_state torch{};
  torch.mallocs = 3;
  torch.allocated_bytes = 600;
  std::strncpy(torch.comm, "python", sizeof torch.comm - 1);
  usdt_alloc_state own{};  // vigil's allocator with a snapshot: its own account wins
  own.snapshots = 1;
  own.reserved_bytes = 1000;
  own.snapshot_allocated_bytes = 400;
  own.largest_free_block_bytes = 300;
  usdt_alloc_state unseen{};  // nothing reserved anywhere: no reserved, slack or fragmentation
  usdt.snapshot.allocators = {{{600, USDT_ALLOC_PYTORCH, 0, 0}, torch},
                              {{601, USDT_ALLOC_VIGIL, 0, 0}, own},
                              {{602, USDT_ALLOC_PYTORCH, 0, 0}, unseen}};
  cuda_proc driver = proc("python");
  driver.live_bytes = 800;
  driver.vmm_mapped_bytes = 200;
  cuda_.snapshot.procs = {{600, driver}};

  AllocatorCollector c(usdt, &cuda_, processes_);
  const auto fs = c.Collect();
  EXPECT_EQ(series(fs, "gpu_memory_allocator_reserved_bytes", "600")[0].gauge.value, 1000);
  EXPECT_EQ(series(fs, "gpu_memory_cached_slack_ratio", "600")[0].gauge.value, 0.4);
  EXPECT_TRUE(series(fs, "gpu_memory_external_fragmentation_ratio", "600").empty());
  EXPECT_EQ(series(fs, "gpu_memory_allocator_allocated_bytes", "601")[0].gauge.value, 400);
  EXPECT_EQ(series(fs, "gpu_memory_external_fragmentation_ratio", "601")[0].gauge.value, 0.5);
  EXPECT_EQ(series(fs, "gpu_memory_allocator_block_allocations_total", "602").size(), 1u);
  EXPECT_TRUE(series(fs, "gpu_memory_allocator_reserved_bytes", "602").empty());
  EXPECT_TRUE(series(fs, "gpu_memory_cached_slack_ratio", "602").empty());

  AllocatorCollector without_cuda(usdt, nullptr, processes_);
  EXPECT_TRUE(series(without_cuda.Collect(), "gpu_memory_allocator_reserved_bytes", "600").empty());
}

}  // namespace
}  // namespace vigil::agent
