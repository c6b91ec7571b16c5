// The CPU backend's paged key/value storage: fixed-size blocks of f16 K and V rows, indexed by
// the block ids a KvBlockAllocator hands out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/caching_allocator.h"
#include "model/llama_hparams.h"

namespace vigil {

class KvCache {
 public:
  // Storage for n_blocks blocks of block_size positions in every layer (f16, as llama.cpp), one
  // allocation per layer from `alloc` (the engine's caching allocator, which the agent watches).
  KvCache(const LlamaHparams& hp, int n_blocks, int block_size, CachingAllocator& alloc);
  // As above from a host allocator of its own (CLI, benchmarks, tests).
  KvCache(const LlamaHparams& hp, int n_blocks, int block_size);

  int n_blocks() const { return n_blocks_; }
  int block_size() const { return block_size_; }
  int kv_dim() const { return kv_dim_; }
  size_t bytes() const { return layers_.size() * layers_[0].size() * sizeof(uint16_t); }

  // Row of `kv_dim` f16 values for position `slot` (0..block_size) of `block` in `layer`.
  uint16_t* k(int layer, int32_t block, int slot) { return row(layer, block, 0, slot); }
  uint16_t* v(int layer, int32_t block, int slot) { return row(layer, block, 1, slot); }
  const uint16_t* k(int layer, int32_t block, int slot) const {
    return const_cast<KvCache*>(this)->row(layer, block, 0, slot);
  }
  const uint16_t* v(int layer, int32_t block, int slot) const {
    return const_cast<KvCache*>(this)->row(layer, block, 1, slot);
  }

 private:
  void allocate_layers(CachingAllocator& alloc);
  uint16_t* row(int layer, int32_t block, int kv, int slot) {
    size_t index = (static_cast<size_t>(block) * 2 + static_cast<size_t>(kv)) * static_cast<size_t>(block_size_) +
                   static_cast<size_t>(slot);
    return layers_[static_cast<size_t>(layer)].data() + index * static_cast<size_t>(kv_dim_);
  }

  std::unique_ptr<CachingAllocator> own_alloc_;  // only with the second constructor
  int n_layer_;
  int n_blocks_;
  int block_size_;
  int kv_dim_;
  std::vector<AllocatorBuffer<uint16_t>> layers_;  // [layer] -> [block][k|v][slot][kv_dim]
};

}  // namespace vigil
