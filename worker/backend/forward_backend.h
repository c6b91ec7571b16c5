// The backend seam: what the engine runs a step's forward pass on (the CPU backend in
// backend/cpu/, the CUDA backend in backend/cuda/), the batch it hands over, and the counters a
// backend reports. The engine owns block numbering (backend/kv_blocks.h); a backend owns the KV
// storage those block ids index, so each backend keeps its cache where its kernels read it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "backend/caching_allocator.h"
#include "backend/kv_blocks.h"
#include "backend/op_profile.h"
#include "model/llama_model.h"
#include "model/lora_adapter.h"

namespace vigil {

// One token of a batch: its id, its position in its sequence, that sequence's block table
// (which must already hold position `pos`), and the LoRA adapter its request uses. Built with
// named fields, `{.token = t, .pos = p, .seq = &s, .want_logits = true}`: four of its six
// fields are an int or a bool, so a positional list would not say which is which.
struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;
  const KvSequence* seq = nullptr;
  bool want_logits = false;
  const LoraAdapter* adapter = nullptr;  // nullptr: the base model; must outlive forward()
  // A generated token rather than a prompt token. llama.cpp decodes those one at a time through
  // its vector dot, prompts through its batched matmul; attention sums in the matching order, so
  // results follow the token's role, never the batch it happens to share.
  bool generated = false;
};

// The sizes a backend allocates for, once, at construction.
struct BackendShape {
  int max_batch = 0;      // tokens per forward call
  int decode_rows = 0;    // tokens of a decode-only step: one per running sequence
  int max_positions = 0;  // per sequence
  int kv_blocks = 0;      // block ids are [0, kv_blocks)
  int kv_block_size = 0;  // positions per block
  int threads = 1;        // host threads the backend may use
};

// Counters of a backend that replays recorded decode steps (CUDA Graphs today), exported as
// vigil_worker_cuda_graph_*. Here, not in backend/cuda/, because the engine and the metrics read
// them through this seam without knowing which backend runs.
struct GraphStats {
  uint64_t captures = 0;               // graphs captured and instantiated
  uint64_t capture_failures = 0;       // capture or instantiate failed
  uint64_t launches = 0;               // successful replays
  uint64_t launch_failures = 0;
  uint64_t eager_steps = 0;            // every step that ran without a graph
  uint64_t fallback_disabled = 0;      // ... because graphs are switched off
  uint64_t fallback_no_bucket = 0;     // ... because the batch is larger than every bucket
  uint64_t fallback_failed_bucket = 0; // ... because its bucket's graph failed before
};

// What a backend runs on, as vigil_worker_info's labels and the verbs' start-up lines say it.
struct BackendDevice {
  std::string kind;         // "cpu", "cuda"
  std::string kernel_path;  // the CPU kernel path ("avx512-vnni", "avx2", "scalar"), or the GPU's matmul
  std::string cpu_model;    // the host CPU's model name; empty for a GPU backend
};

class ForwardBackend {
 public:
  virtual ~ForwardBackend() = default;

  // K/V of every token into the cache, logits for the tokens that want them, in batch order.
  // Throws std::invalid_argument for a batch that breaks the shape's limits and std::exception on
  // one the backend cannot run; the engine fails those requests.
  virtual void forward(std::span<const BatchToken> batch) = 0;
  // Logits of the i-th token (in batch order) that asked for them; valid until the next forward.
  virtual std::span<const float> logits(int i) const = 0;

  virtual bool supports_lora() const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu avx512-vnni, 2 threads"
  virtual BackendDevice device() const = 0;
  // The allocator holding the KV cache; safe from any thread.
  virtual AllocatorStats allocator_stats() const = 0;
  // Where LoRA adapters' tensor data is held; empty: the heap.
  virtual AdapterMemory adapter_memory() const { return {}; }
  // Decode-graph counters; nullopt for a backend without graphs. Engine thread only.
  virtual std::optional<GraphStats> graph_stats() const { return std::nullopt; }
  // Times every op of the following forward passes into `profile` (nullptr: stop); false where
  // the backend cannot (a GPU's ops run asynchronously, inside graphs).
  virtual bool profile_ops(OpProfile* /*profile*/) { return false; }
};

}  // namespace vigil
