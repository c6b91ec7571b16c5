// Paged key/value cache: fixed-size blocks of f16 K and V rows, and a block table per sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/caching_allocator.h"
#include "model/llama_hparams.h"

namespace vigil {

// One sequence's view of the cache: which blocks hold its positions, in order.
struct KvSequence {
  std::vector<int32_t> blocks;  // blocks[p / block_size] holds position p
  int32_t n_past = 0;           // positions already written
};

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
  size_t bytes_per_block() const { return bytes() / static_cast<size_t>(n_blocks_); }

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

// Hands out cache blocks and keeps full blocks of finished sequences for reuse: a block holding
// positions [k·B, (k+1)·B) is keyed by a hash chained over every token up to its end, so a later
// sequence whose prompt starts with the same tokens reuses it (prefix caching). Blocks are
// reference-counted; cached blocks nobody uses are evicted oldest first when the free list runs
// dry. Not thread-safe: the engine's scheduler owns it.
class KvBlockAllocator {
 public:
  explicit KvBlockAllocator(int n_blocks);

  // Blocks a reservation can get: free, plus cached ones nobody uses.
  int free_blocks() const { return static_cast<int>(free_.size() + evictable_.size()); }
  int total_blocks() const { return n_blocks_; }

  // Grows `seq`'s block table to hold `n_positions`; false (and no change) when blocks run out.
  bool reserve(KvSequence& seq, int32_t n_positions, int block_size);
  // Drops `seq`'s references; its cached blocks stay reusable until evicted. Empties it.
  void release(KvSequence& seq);

  // For a sequence with no blocks yet: adopts the cached blocks that hold a prefix of `tokens`,
  // leaving at least the last token to compute. Returns the positions now in the cache.
  // `root` starts the hash chain: K/V depend on more than the tokens (a LoRA adapter changes them),
  // so blocks are found only by sequences computed the same way (0: the base model).
  int32_t match_prefix(KvSequence& seq, std::span<const int32_t> tokens, int block_size, uint64_t root = 0);
  // Makes `seq`'s full blocks among its first `n_computed` positions findable by match_prefix.
  void publish(const KvSequence& seq, std::span<const int32_t> tokens, int32_t n_computed, int block_size,
               uint64_t root = 0);

  uint64_t prefix_queries() const { return queries_; }  // prompt tokens looked up
  uint64_t prefix_hits() const { return hits_; }        // of those, found in the cache

 private:
  struct Cached {
    uint64_t hash = 0;        // 0: not cached
    uint64_t parent = 0;      // hash of the block before it (the chain's root for the first)
    std::vector<int32_t> tokens;
  };
  int32_t take_block();
  void forget(int32_t block);

  int n_blocks_;
  std::vector<int32_t> free_;           // never cached, or evicted
  std::vector<int32_t> refs_;           // [block] sequences using it
  std::vector<Cached> cached_;          // [block]
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::list<int32_t> evictable_;        // cached, refs 0, oldest first
  std::vector<std::list<int32_t>::iterator> evictable_at_;  // [block] position in evictable_
  uint64_t queries_ = 0;
  uint64_t hits_ = 0;
};

}  // namespace vigil
