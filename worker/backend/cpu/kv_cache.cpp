// The CPU backend's KV storage: f16 K and V rows in blocks, one allocation per layer.
#include "backend/cpu/kv_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vigil {

KvCache::KvCache(const LlamaHparams& hp, int n_blocks, int block_size, CachingAllocator& alloc)
    : n_layer_(hp.n_layer), n_blocks_(n_blocks), block_size_(block_size), kv_dim_(hp.kv_dim()) {
  allocate_layers(alloc);
}

KvCache::KvCache(const LlamaHparams& hp, int n_blocks, int block_size)
    : own_alloc_(std::make_unique<CachingAllocator>(std::make_unique<HostSegmentSource>())),
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

}  // namespace vigil
