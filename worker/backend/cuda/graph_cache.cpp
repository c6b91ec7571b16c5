// Host-side policy of CUDA Graph decode steps (see graph_cache.h); fires the cuda_graph_* probes.
#include "backend/cuda/graph_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "base/probes.h"

namespace vigil {

GraphBuckets::GraphBuckets(std::vector<int> sizes) : sizes_(std::move(sizes)) {
  if (sizes_.empty()) throw std::invalid_argument("graph buckets: no sizes");
  for (int s : sizes_)
    if (s <= 0) throw std::invalid_argument("graph buckets: size " + std::to_string(s) + " is not positive");
  std::sort(sizes_.begin(), sizes_.end());
  sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
}

GraphBuckets GraphBuckets::powers_of_two(int max_batch) {
  if (max_batch <= 0) throw std::invalid_argument("graph buckets: max_batch must be positive");
  std::vector<int> sizes;
  for (int s = 1; s < max_batch; s *= 2) sizes.push_back(s);
  sizes.push_back(max_batch);
  return GraphBuckets(std::move(sizes));
}

std::optional<int> GraphBuckets::bucket_for(int n) const {
  if (n <= 0) return std::nullopt;
  auto it = std::lower_bound(sizes_.begin(), sizes_.end(), n);
  if (it == sizes_.end()) return std::nullopt;
  return *it;
}

DecodeGraphCache::DecodeGraphCache(GraphBuckets buckets, bool enabled)
    : buckets_(std::move(buckets)), enabled_(enabled), slots_(buckets_.sizes().size()) {}

DecodeGraphCache::Step DecodeGraphCache::eager(int n, GraphRunner& runner, uint64_t& reason) {
  ++reason;
  ++stats_.eager_steps;
  runner.stage_inputs(n);
  runner.run_eager(n);
  return {Path::kEager, n};
}

DecodeGraphCache::Step DecodeGraphCache::step(int n, GraphRunner& runner) {
  if (n <= 0) throw std::invalid_argument("graph cache: empty decode step");
  if (!enabled_) return eager(n, runner, stats_.fallback_disabled);
  const std::optional<int> bucket = buckets_.bucket_for(n);
  if (!bucket) return eager(n, runner, stats_.fallback_no_bucket);
  const auto sizes = buckets_.sizes();
  Slot& slot = slots_[static_cast<size_t>(std::lower_bound(sizes.begin(), sizes.end(), *bucket) - sizes.begin())];
  if (slot.state == State::kFailed) return eager(n, runner, stats_.fallback_failed_bucket);

  // Inputs are staged before a capture too: the graph records reads of these device buffers.
  runner.stage_inputs(*bucket);
  if (slot.state == State::kEmpty) {
    const GraphRunner::Captured c = runner.capture(*bucket);
    VIGIL_PROBE(cuda_graph_capture, *bucket, c.capture_result);
    if (c.capture_result == 0) VIGIL_PROBE(cuda_graph_instantiate, *bucket, c.instantiate_result);
    if (c.capture_result != 0 || c.instantiate_result != 0 || c.handle < 0) {
      ++stats_.capture_failures;
      slot.state = State::kFailed;
      return eager(n, runner, stats_.fallback_failed_bucket);
    }
    ++stats_.captures;
    slot = {State::kReady, c.handle};
  }
  const int result = runner.launch(slot.handle);
  VIGIL_PROBE(cuda_graph_launch, *bucket, result);
  if (result != 0) {
    ++stats_.launch_failures;
    slot.state = State::kFailed;
    return eager(n, runner, stats_.fallback_failed_bucket);
  }
  ++stats_.launches;
  return {Path::kGraph, *bucket};
}

void DecodeGraphCache::reset() { std::fill(slots_.begin(), slots_.end(), Slot{}); }

}  // namespace vigil
