// Paged KV cache bookkeeping, shared by every backend: a sequence's block table and the allocator
// that numbers blocks (with prefix caching). The storage those ids index belongs to the backend.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace vigil {

// One sequence's view of the cache: which blocks hold its positions, in order.
struct KvSequence {
  std::vector<int32_t> blocks;  // blocks[p / block_size] holds position p
  int32_t n_past = 0;           // positions already written
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
