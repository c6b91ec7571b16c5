// The agent's own series rendered from hand-made bookkeeping: what each BPF program costs by set
// and program, a set's recursion misses as the sum of its programs', and a series per set,
// reason and collector only where the agent recorded one.
#include "collectors/self_collector.h"

#include <gtest/gtest.h>

#include <string>

#include "rendered_families.h"

namespace vigil::agent {
namespace {

double value(const prometheus::ClientMetric& m) { return m.counter.value + m.gauge.value; }

// The sample of FAMILY whose labels include every (name, value) of WANT; fails unless exactly one.
double sample(const std::vector<prometheus::MetricFamily>& fs, const std::string& name,
              const std::vector<std::pair<std::string, std::string>>& want) {
  const prometheus::ClientMetric* found = nullptr;
  int matches = 0;
  for (const auto& m : family(fs, name).metric) {
    bool all = true;
    for (const auto& [k, v] : want) all = all && label(m, k) == v;
    if (all) {
      found = &m;
      ++matches;
    }
  }
  EXPECT_EQ(matches, 1) << name;
  return found ? value(*found) : -1;
}

TEST(SelfCollector, ProgramCostsBySetAndProgramAndRecursionSummedPerSet) {
  AgentStats stats;
  stats.set_enabled("cuda", true, "");
  stats.set_enabled("nccl", false, "no libnccl mapped");
  stats.add_kernel_source("cuda", [] {
    KernelCounters k;
    k.events = 40;
    k.ringbuf_drops = 2;
    k.programs = {{"cu_mem_alloc_entry", 3'000'000'000, 1000, 3}, {"cu_mem_free_entry", 500'000'000, 10, 4}};
    return k;
  });
  stats.set_bpf_stats_enabled(true);
  auto fs = SelfCollector(stats).Collect();

  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_bpf_program_run_seconds_total", {{"set", "cuda"}, {"program", "cu_mem_alloc_entry"}}), 3.0);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_bpf_program_runs_total", {{"program", "cu_mem_free_entry"}}), 10);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_bpf_program_recursion_misses_total", {{"program", "cu_mem_free_entry"}}), 4);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_recursion_misses_total", {{"set", "cuda"}}), 7);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_events_total", {{"set", "cuda"}}), 40);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_ringbuf_drops_total", {{"set", "cuda"}}), 2);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_bpf_stats_enabled", {}), 1);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_probe_set_enabled", {{"set", "nccl"}, {"reason", "no libnccl mapped"}}), 0);
  // Only the set that has a kernel source has kernel series.
  EXPECT_EQ(family(fs, "vigil_agent_events_total").metric.size(), 1u);
  EXPECT_EQ(family(fs, "vigil_agent_bpf_program_runs_total").metric.size(), 2u);
}

TEST(SelfCollector, FailuresScrapesAndTablesOnlyWhereRecorded) {
  AgentStats stats;
  auto fs = SelfCollector(stats).Collect();
  EXPECT_TRUE(family(fs, "vigil_agent_attach_failures_total").metric.empty());
  EXPECT_TRUE(family(fs, "vigil_agent_collector_scrapes_total").metric.empty());
  EXPECT_TRUE(family(fs, "vigil_agent_table_entries").metric.empty());

  stats.attach_failure("usdt", "no_notes");
  stats.attach_failure("usdt", "no_notes");
  stats.record_scrape("tcp", 0.25);
  stats.add_table_source("tcp", "conns", [] { return uint64_t{17}; });
  fs = SelfCollector(stats).Collect();
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_attach_failures_total", {{"set", "usdt"}, {"reason", "no_notes"}}), 2);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_collector_scrapes_total", {{"collector", "tcp"}}), 1);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_collector_scrape_duration_seconds", {{"collector", "tcp"}}), 0.25);
  EXPECT_DOUBLE_EQ(sample(fs, "vigil_agent_table_entries", {{"set", "tcp"}, {"table", "conns"}}), 17);
}

}  // namespace
}  // namespace vigil::agent
