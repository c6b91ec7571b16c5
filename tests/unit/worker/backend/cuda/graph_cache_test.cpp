// Graph buckets and the decode graph cache driven by a fake runner: bucket choice, padding,
// capture once then replay, eager fallbacks with their counters, failures never retried.
#include "backend/cuda/graph_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vigil {
namespace {

// Records every call; results to return are set per test. CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
// is 900 and CUDA_ERROR_LAUNCH_FAILED 719 in the driver API.
struct FakeRunner final : GraphRunner {
  std::vector<std::string> calls;
  int capture_result = 0, instantiate_result = 0, launch_result = 0;
  int next_handle = 0;
  void stage_inputs(int rows) override { calls.push_back("stage " + std::to_string(rows)); }
  Captured capture(int rows) override {
    calls.push_back("capture " + std::to_string(rows));
    if (capture_result || instantiate_result) return {capture_result, instantiate_result, -1};
    return {0, 0, next_handle++};
  }
  int launch(int handle) override {
    calls.push_back("launch " + std::to_string(handle));
    return launch_result;
  }
  void run_eager(int rows) override { calls.push_back("eager " + std::to_string(rows)); }
};

TEST(GraphBuckets, SortsDeduplicatesAndPicksSmallestThatFits) {
  GraphBuckets b({8, 1, 4, 4, 2});
  EXPECT_EQ(std::vector<int>(b.sizes().begin(), b.sizes().end()), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(b.bucket_for(1), 1);
  EXPECT_EQ(b.bucket_for(3), 4);
  EXPECT_EQ(b.bucket_for(8), 8);
  EXPECT_EQ(b.bucket_for(9), std::nullopt);
  EXPECT_EQ(b.bucket_for(0), std::nullopt);
}

TEST(GraphBuckets, PowersOfTwoEndAtMaxBatch) {
  auto b = GraphBuckets::powers_of_two(12);
  EXPECT_EQ(std::vector<int>(b.sizes().begin(), b.sizes().end()), (std::vector<int>{1, 2, 4, 8, 12}));
  auto one = GraphBuckets::powers_of_two(1);
  EXPECT_EQ(std::vector<int>(one.sizes().begin(), one.sizes().end()), (std::vector<int>{1}));
}

TEST(GraphBuckets, RejectsNonPositiveSizes) {
  EXPECT_THROW(GraphBuckets({}), std::invalid_argument);
  EXPECT_THROW(GraphBuckets({4, 0}), std::invalid_argument);
  EXPECT_THROW(GraphBuckets::powers_of_two(0), std::invalid_argument);
}

TEST(DecodeGraphCache, CapturesOncePerBucketThenReplaysPadded) {
  DecodeGraphCache cache(GraphBuckets({1, 4}), true);
  FakeRunner r;
  auto s = cache.step(3, r);
  EXPECT_EQ(s.path, DecodeGraphCache::Path::kGraph);
  EXPECT_EQ(s.rows, 4);
  cache.step(4, r);
  cache.step(1, r);
  EXPECT_EQ(r.calls, (std::vector<std::string>{"stage 4", "capture 4", "launch 0", "stage 4", "launch 0",
                                               "stage 1", "capture 1", "launch 1"}));
  EXPECT_EQ(cache.stats().captures, 2u);
  EXPECT_EQ(cache.stats().launches, 3u);
  EXPECT_EQ(cache.stats().eager_steps, 0u);
}

TEST(DecodeGraphCache, DisabledRunsEagerUnpadded) {
  DecodeGraphCache cache(GraphBuckets({4}), false);
  FakeRunner r;
  auto s = cache.step(3, r);
  EXPECT_EQ(s.path, DecodeGraphCache::Path::kEager);
  EXPECT_EQ(s.rows, 3);
  EXPECT_EQ(r.calls, (std::vector<std::string>{"stage 3", "eager 3"}));
  EXPECT_EQ(cache.stats().fallback_disabled, 1u);
  EXPECT_EQ(cache.stats().eager_steps, 1u);
  EXPECT_EQ(cache.stats().captures, 0u);
}

TEST(DecodeGraphCache, BatchLargerThanEveryBucketRunsEager) {
  DecodeGraphCache cache(GraphBuckets({1, 2}), true);
  FakeRunner r;
  EXPECT_EQ(cache.step(5, r).path, DecodeGraphCache::Path::kEager);
  EXPECT_EQ(cache.stats().fallback_no_bucket, 1u);
  EXPECT_EQ(r.calls, (std::vector<std::string>{"stage 5", "eager 5"}));
}

TEST(DecodeGraphCache, FailedCaptureFallsBackAndIsNotRetried) {
  DecodeGraphCache cache(GraphBuckets({2, 4}), true);
  FakeRunner r;
  r.capture_result = 900;
  EXPECT_EQ(cache.step(2, r).path, DecodeGraphCache::Path::kEager);
  r.capture_result = 0;
  EXPECT_EQ(cache.step(2, r).path, DecodeGraphCache::Path::kEager);  // same bucket: no second capture
  EXPECT_EQ(cache.step(3, r).path, DecodeGraphCache::Path::kGraph);  // another bucket still captures
  EXPECT_EQ(r.calls, (std::vector<std::string>{"stage 2", "capture 2", "stage 2", "eager 2", "stage 2", "eager 2",
                                               "stage 4", "capture 4", "launch 0"}));
  EXPECT_EQ(cache.stats().capture_failures, 1u);
  EXPECT_EQ(cache.stats().fallback_failed_bucket, 2u);
  EXPECT_EQ(cache.stats().captures, 1u);
}

TEST(DecodeGraphCache, FailedInstantiateCountsAsCaptureFailure) {
  DecodeGraphCache cache(GraphBuckets({1}), true);
  FakeRunner r;
  r.instantiate_result = 2;  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(cache.step(1, r).path, DecodeGraphCache::Path::kEager);
  EXPECT_EQ(cache.stats().capture_failures, 1u);
}

TEST(DecodeGraphCache, FailedLaunchRunsTheStepEagerAndRetiresTheGraph) {
  DecodeGraphCache cache(GraphBuckets({4}), true);
  FakeRunner r;
  r.launch_result = 719;
  EXPECT_EQ(cache.step(4, r).path, DecodeGraphCache::Path::kEager);
  r.launch_result = 0;
  EXPECT_EQ(cache.step(4, r).path, DecodeGraphCache::Path::kEager);
  EXPECT_EQ(r.calls, (std::vector<std::string>{"stage 4", "capture 4", "launch 0", "stage 4", "eager 4", "stage 4",
                                               "eager 4"}));
  EXPECT_EQ(cache.stats().launch_failures, 1u);
  EXPECT_EQ(cache.stats().launches, 0u);
}

TEST(DecodeGraphCache, ResetCapturesAgain) {
  DecodeGraphCache cache(GraphBuckets({1}), true);
  FakeRunner r;
  r.capture_result = 900;
  cache.step(1, r);
  cache.reset();
  r.capture_result = 0;
  EXPECT_EQ(cache.step(1, r).path, DecodeGraphCache::Path::kGraph);
  EXPECT_EQ(cache.stats().captures, 1u);
}

TEST(DecodeGraphCache, EmptyStepThrows) {
  DecodeGraphCache cache(GraphBuckets({1}), true);
  FakeRunner r;
  EXPECT_THROW(cache.step(0, r), std::invalid_argument);
}

}  // namespace
}  // namespace vigil
