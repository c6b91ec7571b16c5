// Tests for the worker's metrics: series and values after observations, and `promtool check
// metrics` accepting the exposition.
#include "server/worker_metrics.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace vigil {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(WorkerMetrics, ObservationsShowUp) {
  WorkerMetrics m("smol", "0.1.0", {"cpu", "avx2", "Test CPU @ 2.70GHz"}, {"huge_pages", 96000000, 94371840});
  m.request_queued(0.002);
  m.first_token(0.03);
  m.tokens_after(0.004, 2);
  m.request_finished(FinishReason::kLength, 7, 3, 0.05);
  m.request_finished(FinishReason::kStop, 5, 1, 0.02);
  m.rejected(Rejection::kQueueFull);
  EngineStats s;
  s.running = 2;
  s.waiting = 5;
  s.kv_blocks_total = 10;
  s.kv_blocks_free = 6;
  s.preemptions = 4;
  std::string text = m.scrape(s);
  EXPECT_TRUE(has_line(text, "vigil_worker_requests_running 2")) << text;
  EXPECT_TRUE(has_line(text, "vigil_worker_requests_waiting 5"));
  EXPECT_TRUE(has_line(text, "vigil_worker_kv_cache_usage_ratio 0.4"));
  EXPECT_TRUE(has_line(text, "vigil_worker_preemptions_total 4"));
  EXPECT_TRUE(has_line(text, "vigil_worker_prompt_tokens_total 12"));
  EXPECT_TRUE(has_line(text, "vigil_worker_generation_tokens_total 4"));
  EXPECT_TRUE(has_line(text, "vigil_worker_request_success_total{finish_reason=\"length\"} 1"));
  EXPECT_TRUE(has_line(text, "vigil_worker_request_success_total{finish_reason=\"stop\"} 1"));
  EXPECT_TRUE(has_line(text, "vigil_worker_request_success_total{finish_reason=\"cancelled\"} 0"));
  EXPECT_TRUE(has_line(text, "vigil_worker_requests_rejected_total{reason=\"queue_full\"} 1"));
  EXPECT_TRUE(has_line(text, "vigil_worker_info{backend=\"cpu\",cpu_model=\"Test CPU @ 2.70GHz\",kernel_path=\"avx2\",model=\"smol\","
                             "version=\"0.1.0\",weights=\"huge_pages\"} 1"));
  EXPECT_TRUE(has_line(text, "vigil_worker_weights_bytes 96000000"));
  EXPECT_TRUE(has_line(text, "vigil_worker_weights_pmd_mapped_bytes 94371840"));
  EXPECT_EQ(text.find("vigil_worker_cuda_graph"), std::string::npos) << "a CPU worker has no graph series";
  // Two inter-token gaps of 2 ms each, both in the 2.5 ms bucket and above the 1 ms one.
  EXPECT_TRUE(has_line(text, "vigil_worker_inter_token_latency_seconds_bucket{le=\"0.0025\"} 2"));
  EXPECT_TRUE(has_line(text, "vigil_worker_inter_token_latency_seconds_bucket{le=\"0.001\"} 0"));
  EXPECT_TRUE(has_line(text, "vigil_worker_inter_token_latency_seconds_bucket{le=\"0.0005\"} 0"));
  EXPECT_TRUE(has_line(text, "vigil_worker_time_to_first_token_seconds_count 1"));
  EXPECT_TRUE(has_line(text, "vigil_worker_request_queue_time_seconds_count 1"));
  EXPECT_TRUE(has_line(text, "vigil_worker_e2e_request_latency_seconds_count 2"));
  EXPECT_TRUE(has_line(text, "vigil_worker_request_prompt_tokens_sum 12"));
  EXPECT_TRUE(has_line(text, "vigil_worker_request_generation_tokens_sum 4"));
}

TEST(WorkerMetrics, PreemptionCounterFollowsTheEngine) {
  WorkerMetrics m("smol", "0.1.0", {"cpu", "scalar", ""}, {"huge_pages", 0, 0});
  EngineStats s;
  s.preemptions = 2;
  m.scrape(s);
  s.preemptions = 5;
  EXPECT_TRUE(has_line(m.scrape(s), "vigil_worker_preemptions_total 5"));
}

TEST(WorkerMetrics, GraphCountersFollowTheBackend) {
  WorkerMetrics m("smol", "0.1.0", {"cuda", "quant-gemv", ""}, {"page_cache", 0, 0});
  EngineStats s;
  s.graphs = GraphStats{};
  s.graphs->captures = 2;
  s.graphs->launches = 40;
  s.graphs->fallback_disabled = 0;
  s.graphs->fallback_no_bucket = 3;
  std::string text = m.scrape(s);
  EXPECT_TRUE(has_line(text, "vigil_worker_cuda_graph_captures_total 2")) << text;
  EXPECT_TRUE(has_line(text, "vigil_worker_cuda_graph_launches_total 40"));
  EXPECT_TRUE(has_line(text, "vigil_worker_cuda_graph_eager_steps_total{reason=\"no_bucket\"} 3"));
  EXPECT_TRUE(has_line(text, "vigil_worker_cuda_graph_eager_steps_total{reason=\"disabled\"} 0"));
  s.graphs->capture_failures = 1;
  s.graphs->fallback_failed_bucket = 5;
  s.graphs->launches = 41;
  text = m.scrape(s);
  EXPECT_TRUE(has_line(text, "vigil_worker_cuda_graph_capture_failures_total 1"));
  EXPECT_TRUE(has_line(text, "vigil_worker_cuda_graph_eager_steps_total{reason=\"failed_bucket\"} 5"));
  EXPECT_TRUE(has_line(text, "vigil_worker_cuda_graph_launches_total 41"));
  EXPECT_TRUE(has_line(text, "vigil_worker_info{backend=\"cuda\",cpu_model=\"\",kernel_path=\"quant-gemv\",model=\"smol\",version=\"0.1.0\",weights=\"page_cache\"} 1"));
}

TEST(WorkerMetrics, PromtoolAcceptsTheExposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) GTEST_FAIL() << "promtool not installed (scripts/setup.sh installs the prometheus package)";
  WorkerMetrics m("SmolLM2-135M-Instruct.Q4_1", "0.1.0", {"cpu", "avx2", ""}, {"huge_pages", 0, 0});
  m.first_token(0.01);
  m.request_finished(FinishReason::kCancelled, 3, 0, 0.1);
  EngineStats with_graphs;
  with_graphs.graphs = GraphStats{};
  const std::string path = ::testing::TempDir() + "vigil_worker_metrics.txt";
  std::ofstream(path) << m.scrape(with_graphs);
  FILE* p = popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "") << "promtool lint findings";
}

}  // namespace
}  // namespace vigil
