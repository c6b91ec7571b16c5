// What the engine runs a step's forward pass on: the CPU context here, a GPU context elsewhere.
// The engine owns block numbering (KvBlockAllocator); a backend owns the KV storage those block
// ids index, so each backend keeps its cache where its kernels read it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "backend/graph_cache.h"
#include "engine/caching_allocator.h"
#include "model/llama_context.h"
#include "model/llama_model.h"

namespace vigil {

// The sizes a backend allocates for, once, at construction.
struct BackendShape {
  int max_batch = 0;      // tokens per forward call
  int decode_rows = 0;    // tokens of a decode-only step: one per running sequence
  int max_positions = 0;  // per sequence
  int kv_blocks = 0;      // block ids are [0, kv_blocks)
  int kv_block_size = 0;  // positions per block
  int threads = 1;        // host threads the backend may use
};

class ForwardBackend {
 public:
  virtual ~ForwardBackend() = default;

  // As LlamaContext::forward: K/V of every token into the cache, logits for the tokens that want
  // them. Throws std::exception on a batch the backend cannot run; the engine fails those requests.
  virtual void forward(std::span<const BatchToken> batch) = 0;
  // Logits of the i-th token (in batch order) that asked for them; valid until the next forward.
  virtual std::span<const float> logits(int i) const = 0;

  virtual bool supports_lora() const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu avx512-vnni, 2 threads"
  // The allocator holding the KV cache; safe from any thread.
  virtual AllocatorStats allocator_stats() const = 0;
  // Decode-graph counters; nullopt for a backend without graphs. Engine thread only.
  virtual std::optional<GraphStats> graph_stats() const { return std::nullopt; }
};

// Builds the backend for an engine; set by `serve` from the config. Throws std::runtime_error
// naming the problem (no device, unsupported model) when the backend cannot start.
using BackendFactory = std::function<std::unique_ptr<ForwardBackend>(const LlamaModel&, const BackendShape&)>;

}  // namespace vigil
