// Paged key/value cache: fixed-size blocks of f16 K and V rows, and a block table per sequence.
#include "model/kv_cache.h"

#include <stdexcept>
#include <string>

namespace vigil {

KvCache::KvCache(const LlamaHparams& hp, int n_blocks, int block_size, CachingAllocator& alloc)
    : n_layer_(hp.n_layer), n_blocks_(n_blocks), block_size_(block_size), kv_dim_(hp.kv_dim()) {
  allocate_layers(alloc);
}

KvCache::KvCache(const LlamaHparams& hp, int n_blocks, int block_size)
    : own_alloc_(std::make_unique<CachingAllocator>(std::make_unique<HostMemoryBackend>())),
      n_layer_(hp.n_layer),
      n_blocks_(n_blocks),
      block_size_(block_size),
      kv_dim_(hp.kv_dim()) {
  allocate_layers(*own_alloc_);
}

void KvCache::allocate_layers(CachingAllocator& alloc) {
  if (n_blocks_ <= 0 || block_size_ <= 0)
    throw std::invalid_argument("kv cache needs at least one block of at least one position (got " +
                                std::to_string(n_blocks_) + " x " + std::to_string(block_size_) + ")");
  const size_t per_layer = static_cast<size_t>(n_blocks_) * 2 * static_cast<size_t>(block_size_) *
                           static_cast<size_t>(kv_dim_);
  layers_.reserve(static_cast<size_t>(n_layer_));
  for (int l = 0; l < n_layer_; ++l) layers_.emplace_back(alloc, per_layer);
}

KvBlockAllocator::KvBlockAllocator(int n_blocks) : n_blocks_(n_blocks) {
  free_.reserve(static_cast<size_t>(n_blocks));
  // Highest index on top so blocks are handed out in ascending order.
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool KvBlockAllocator::reserve(KvSequence& seq, int32_t n_positions, int block_size) {
  size_t need = static_cast<size_t>((n_positions + block_size - 1) / block_size);
  if (need <= seq.blocks.size()) return true;
  if (need - seq.blocks.size() > free_.size()) return false;
  while (seq.blocks.size() < need) {
    seq.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvBlockAllocator::release(KvSequence& seq) {
  for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it) free_.push_back(*it);
  seq.blocks.clear();
  seq.n_past = 0;
}

}  // namespace vigil
