// A LoRA adapter in llama.cpp's GGUF format, validated against a base model and held in memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/ggml_types.h"
#include "model/gguf.h"
#include "model/llama_model.h"

namespace vigil {

// The largest rank accepted; bounds the forward pass's buffers, which are sized once (vLLM's
// largest supported rank is 512 too).
inline constexpr int kMaxLoraRank = 512;

// One adapted matrix W [n_out, n_in]: the forward adds scale · B (A x) to W x.
// In ggml terms lora_a is [n_in, rank] and lora_b is [rank, n_out], which as row-major matrices
// are A [rank, n_in] and B [n_out, rank]: exactly the WeightViews matmul() wants.
struct LoraPair {
  WeightView a;       // rows = rank, cols = n_in
  WeightView b;       // rows = n_out, cols = rank
  float scale = 1.0f; // alpha / rank (llama.cpp's rule: 1 when alpha is 0)
};

// Where an adapter's tensor data is held: a buffer of `bytes`, given back when its last copy goes.
// The engine passes its caching allocator's (an agent watching the allocator sees adapters come
// and go); empty: the heap.
using AdapterMemory = std::function<std::shared_ptr<uint8_t[]>(size_t bytes)>;

class LoraAdapter {
 public:
  // Reads, validates and copies the adapter into `memory` (the file may change or vanish
  // afterwards). Throws GgufError with one message naming the file and the problem.
  static std::shared_ptr<const LoraAdapter> load(const std::string& path, const LlamaModel& model,
                                                 const AdapterMemory& memory = {});
  static std::shared_ptr<const LoraAdapter> from_gguf(const GgufFile& file, const LlamaModel& model,
                                                      const AdapterMemory& memory = {});

  // The pair adapting `target` of `layer`, or nullptr when the adapter leaves it alone.
  const LoraPair* pair(int layer, LayerMatrix target) const {
    return pairs_[static_cast<size_t>(layer) * kLayerMatrices + static_cast<size_t>(target)].get();
  }
  // Unique per load, never reused (an address can be, after an unload): prefix caching keys the
  // KV blocks it shares on it, so blocks computed with one adapter never serve another.
  uint64_t id() const { return id_; }
  int max_rank() const { return max_rank_; }
  int n_pairs() const { return n_pairs_; }
  size_t bytes() const { return bytes_; }  // tensor data held

 private:
  LoraAdapter() = default;

  uint64_t id_ = 0;
  int max_rank_ = 0;
  int n_pairs_ = 0;
  std::vector<std::unique_ptr<LoraPair>> pairs_;  // [n_layer * kLayerMatrices], null when absent
  std::shared_ptr<uint8_t[]> data_;               // every A and B, copied out of the file
  size_t bytes_ = 0;
};

}  // namespace vigil
