// Host-side policy of CUDA Graph decode steps: batch-size buckets, one graph per bucket, replay,
// and eager fallback; GPU-free so it is unit-tested on machines without a device.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/forward_backend.h"

namespace vigil {

// Batch sizes a decode graph is captured for; a batch runs in the smallest bucket that holds it,
// padded with dummy rows.
class GraphBuckets {
 public:
  // Sizes must be positive; they are sorted and deduplicated. Throws std::invalid_argument.
  explicit GraphBuckets(std::vector<int> sizes);
  // 1, 2, 4, ... up to max_batch, and max_batch itself: padding wastes at most half a bucket.
  static GraphBuckets powers_of_two(int max_batch);

  std::optional<int> bucket_for(int n) const;  // nullopt when n is 0 or above the largest
  std::span<const int> sizes() const { return sizes_; }

 private:
  std::vector<int> sizes_;
};

// What a decode step of the graph cache drives: the CUDA backend on a GPU, a fake in tests.
// Results are CUresult values (0 success), passed through to probes and counters untouched.
class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  // Copies the step's inputs to the device, padded to `rows` (the bucket, or n when eager).
  virtual void stage_inputs(int rows) = 0;
  struct Captured {
    int capture_result = 0;      // cuStreamBeginCapture .. EndCapture
    int instantiate_result = 0;  // cuGraphInstantiate (only meaningful when capture succeeded)
    int handle = -1;             // the runner's graph for the bucket when both succeeded
  };
  // Records the forward pass for `rows` rows into a graph without running it.
  virtual Captured capture(int rows) = 0;
  virtual int launch(int handle) = 0;
  virtual void run_eager(int rows) = 0;
};

class DecodeGraphCache {
 public:
  DecodeGraphCache(GraphBuckets buckets, bool enabled);

  enum class Path { kGraph, kEager };
  struct Step {
    Path path;
    int rows;  // rows computed: the bucket on the graph path, n on the eager one
  };
  // Runs a decode step of n rows: replays the bucket's graph, capturing it on first use; a bucket
  // whose capture or launch failed is not retried (failures are persistent in practice, and a
  // capture per step would cost more than eager execution) and runs eagerly from then on.
  Step step(int n, GraphRunner& runner);

  // Forgets every graph, e.g. when the buffers they captured were reallocated.
  void reset();
  bool enabled() const { return enabled_; }
  const GraphBuckets& buckets() const { return buckets_; }
  const GraphStats& stats() const { return stats_; }

 private:
  enum class State : uint8_t { kEmpty, kReady, kFailed };
  struct Slot {
    State state = State::kEmpty;
    int handle = -1;
  };
  Step eager(int n, GraphRunner& runner, uint64_t& reason);

  GraphBuckets buckets_;
  bool enabled_;
  std::vector<Slot> slots_;  // [bucket index]
  GraphStats stats_;
};

}  // namespace vigil
