// Flattens a batch of BatchTokens into the fixed-size index arrays the CUDA kernels read (tokens,
// positions, KV slots, block tables, logits rows), padded to a graph bucket; GPU-free.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/forward_backend.h"

namespace vigil {

// Geometry of the device KV cache the arrays index into.
struct DeviceKvGeometry {
  int block_size = 0;
  int max_blocks_per_seq = 0;  // columns of the block table
  int pad_block = 0;           // block that padding rows write to and read from; no sequence owns it
};

// Host staging for one step; capacity is allocated once (for max_rows) so staging never allocates.
struct DeviceBatch {
  int n = 0;         // real tokens
  int rows = 0;      // n plus padding rows
  int n_logits = 0;  // real tokens that want logits
  std::vector<int32_t> tokens;       // [max_rows]
  std::vector<int32_t> pos;          // [max_rows]
  std::vector<int32_t> kv_slot;      // [max_rows] block * block_size + pos % block_size
  std::vector<int32_t> block_table;  // [max_rows, max_blocks_per_seq], unused entries pad_block
  std::vector<int32_t> logit_rows;   // [max_rows] rows wanting logits first, then padding rows

  DeviceBatch(int max_rows, const DeviceKvGeometry& geo);
  int max_rows() const { return static_cast<int>(tokens.size()); }
};

// Fills `out` for `batch` padded to `rows` (>= batch.size()). Padding rows are token 0 at
// position 0 in the pad block, so they compute harmless values and touch no sequence's cache.
// Throws std::invalid_argument for a batch that does not fit the arrays or the geometry.
void stage_batch(std::span<const BatchToken> batch, int rows, const DeviceKvGeometry& geo, DeviceBatch& out);

}  // namespace vigil
