// Flattens a batch into the CUDA kernels' index arrays (see device_batch.h).
#include "backend/cuda/device_batch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vigil {

DeviceBatch::DeviceBatch(int max_rows, const DeviceKvGeometry& geo) {
  if (max_rows <= 0 || geo.block_size <= 0 || geo.max_blocks_per_seq <= 0)
    throw std::invalid_argument("device batch: rows, block size and blocks per sequence must be positive");
  const size_t r = static_cast<size_t>(max_rows);
  tokens.resize(r);
  pos.resize(r);
  kv_slot.resize(r);
  block_table.resize(r * static_cast<size_t>(geo.max_blocks_per_seq));
  logit_rows.resize(r);
}

void stage_batch(std::span<const BatchToken> batch, int rows, const DeviceKvGeometry& geo, DeviceBatch& out) {
  const int n = static_cast<int>(batch.size());
  if (rows < n || rows > out.max_rows())
    throw std::invalid_argument("device batch: " + std::to_string(n) + " tokens padded to " +
                                std::to_string(rows) + " rows, capacity " + std::to_string(out.max_rows()));
  const size_t cols = static_cast<size_t>(geo.max_blocks_per_seq);
  if (out.block_table.size() != out.tokens.size() * cols)
    throw std::invalid_argument("device batch: staged for another block-table width");
  std::fill(out.block_table.begin(), out.block_table.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(rows) * cols),
            geo.pad_block);
  out.n = n;
  out.rows = rows;
  out.n_logits = 0;
  for (int i = 0; i < n; ++i) {
    const BatchToken& t = batch[static_cast<size_t>(i)];
    const size_t needed = static_cast<size_t>(t.pos / geo.block_size) + 1;
    if (!t.seq || t.pos < 0 || t.seq->blocks.size() < needed)
      throw std::invalid_argument("device batch: position " + std::to_string(t.pos) + " has no KV block");
    if (t.seq->blocks.size() > cols)
      throw std::invalid_argument("device batch: sequence of " + std::to_string(t.seq->blocks.size()) +
                                  " blocks exceeds " + std::to_string(cols) + " per sequence");
    out.tokens[static_cast<size_t>(i)] = t.token;
    out.pos[static_cast<size_t>(i)] = t.pos;
    out.kv_slot[static_cast<size_t>(i)] =
        t.seq->blocks[static_cast<size_t>(t.pos / geo.block_size)] * geo.block_size + t.pos % geo.block_size;
    std::copy(t.seq->blocks.begin(), t.seq->blocks.end(), out.block_table.begin() + static_cast<ptrdiff_t>(i * cols));
    if (t.want_logits) out.logit_rows[static_cast<size_t>(out.n_logits++)] = i;
  }
  for (int i = n; i < rows; ++i) {
    out.tokens[static_cast<size_t>(i)] = 0;
    out.pos[static_cast<size_t>(i)] = 0;
    out.kv_slot[static_cast<size_t>(i)] = geo.pad_block * geo.block_size;
  }
  // Graphs compute logits for every row of the bucket; the rows after n_logits are scratch.
  for (int i = out.n_logits; i < rows; ++i) out.logit_rows[static_cast<size_t>(i)] = i;
}

}  // namespace vigil
