#include "backend/kv_blocks.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vigil {

KvBlockAllocator::KvBlockAllocator(int n_blocks)
    : n_blocks_(n_blocks),
      refs_(static_cast<size_t>(n_blocks), 0),
      cached_(static_cast<size_t>(n_blocks)),
      evictable_at_(static_cast<size_t>(n_blocks)) {
  free_.reserve(static_cast<size_t>(n_blocks));
  // Highest index on top so blocks are handed out in ascending order.
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

namespace {

// Chains a block's tokens onto its parent's hash (FNV-1a over the ids, then a final mix);
// 0 is reserved for "not cached".
uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = parent ^ 0xcbf29ce484222325ull;
  for (int32_t t : tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h ? h : 1;
}

}  // namespace

int32_t KvBlockAllocator::take_block() {
  if (free_.empty()) {
    // Evict the cached block unused for longest.
    const int32_t b = evictable_.front();
    evictable_.pop_front();
    forget(b);
    return b;
  }
  const int32_t b = free_.back();
  free_.pop_back();
  return b;
}

void KvBlockAllocator::forget(int32_t block) {
  Cached& c = cached_[static_cast<size_t>(block)];
  auto it = by_hash_.find(c.hash);
  if (it != by_hash_.end() && it->second == block) by_hash_.erase(it);
  c.hash = 0;
}

bool KvBlockAllocator::reserve(KvSequence& seq, int32_t n_positions, int block_size) {
  size_t need = static_cast<size_t>((n_positions + block_size - 1) / block_size);
  if (need <= seq.blocks.size()) return true;
  if (need - seq.blocks.size() > static_cast<size_t>(free_blocks())) return false;
  while (seq.blocks.size() < need) {
    const int32_t b = take_block();
    refs_[static_cast<size_t>(b)] = 1;
    seq.blocks.push_back(b);
  }
  return true;
}

void KvBlockAllocator::release(KvSequence& seq) {
  for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it) {
    const auto b = static_cast<size_t>(*it);
    if (--refs_[b] > 0) continue;
    if (cached_[b].hash != 0) {
      evictable_at_[b] = evictable_.insert(evictable_.end(), *it);
    } else {
      free_.push_back(*it);
    }
  }
  seq.blocks.clear();
  seq.n_past = 0;
}

int32_t KvBlockAllocator::match_prefix(KvSequence& seq, std::span<const int32_t> tokens, int block_size,
                                       uint64_t root) {
  const size_t bs = static_cast<size_t>(block_size);
  // Full blocks only, and never the whole prompt: its last token must run to produce logits.
  const size_t full = tokens.empty() ? 0 : (tokens.size() - 1) / bs;
  queries_ += tokens.size();
  uint64_t parent = root;
  for (size_t k = 0; k < full && seq.blocks.size() == k; ++k) {
    auto block_tokens = tokens.subspan(k * bs, bs);
    const uint64_t h = chain_hash(parent, block_tokens);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    const auto b = static_cast<size_t>(it->second);
    const Cached& c = cached_[b];
    // The hash only finds candidates; the tokens and the chain decide.
    if (c.parent != parent || !std::equal(c.tokens.begin(), c.tokens.end(), block_tokens.begin(), block_tokens.end()))
      break;
    if (refs_[b]++ == 0) evictable_.erase(evictable_at_[b]);
    seq.blocks.push_back(it->second);
    parent = h;
  }
  const auto matched = static_cast<int32_t>(seq.blocks.size() * bs);
  hits_ += static_cast<uint64_t>(matched);
  return matched;
}

void KvBlockAllocator::publish(const KvSequence& seq, std::span<const int32_t> tokens, int32_t n_computed,
                               int block_size, uint64_t root) {
  const size_t bs = static_cast<size_t>(block_size);
  const size_t full = std::min(static_cast<size_t>(n_computed) / bs, seq.blocks.size());
  uint64_t parent = root;
  for (size_t k = 0; k < full; ++k) {
    auto block_tokens = tokens.subspan(k * bs, bs);
    const uint64_t h = chain_hash(parent, block_tokens);
    const auto b = static_cast<size_t>(seq.blocks[k]);
    Cached& c = cached_[b];
    if (c.hash == 0 && !by_hash_.count(h)) {
      c.hash = h;
      c.parent = parent;
      c.tokens.assign(block_tokens.begin(), block_tokens.end());
      by_hash_.emplace(h, seq.blocks[k]);
    }
    parent = h;
  }
}

}  // namespace vigil
