// Staging a batch into the CUDA kernels' index arrays: KV slots, block tables, logits rows and
// padding rows that only touch the pad block.
#include "backend/cuda/device_batch.h"

#include <gtest/gtest.h>

namespace vigil {
namespace {

TEST(DeviceBatch, StagesSlotsTablesAndPadding) {
  DeviceKvGeometry geo{.block_size = 4, .max_blocks_per_seq = 3, .pad_block = 9};
  DeviceBatch b(4, geo);
  KvSequence s1{.blocks = {5, 2}, .n_past = 0};
  KvSequence s2{.blocks = {7}, .n_past = 0};
  std::vector<BatchToken> batch = {{.token = 11, .pos = 5, .seq = &s1, .want_logits = false},
                                   {.token = 12, .pos = 2, .seq = &s2, .want_logits = true}};
  stage_batch(batch, 4, geo, b);
  EXPECT_EQ(b.n, 2);
  EXPECT_EQ(b.rows, 4);
  EXPECT_EQ(b.n_logits, 1);
  EXPECT_EQ(b.tokens[0], 11);
  EXPECT_EQ(b.kv_slot[0], 2 * 4 + 1);  // position 5 lives in block 2 (the second), slot 1
  EXPECT_EQ(b.kv_slot[1], 7 * 4 + 2);
  EXPECT_EQ(std::vector<int32_t>(b.block_table.begin(), b.block_table.begin() + 6),
            (std::vector<int32_t>{5, 2, 9, 7, 9, 9}));
  EXPECT_EQ(b.logit_rows[0], 1);
  // Padding rows: token 0, position 0, the pad block's first slot and a table of pad blocks.
  for (int i = 2; i < 4; ++i) {
    EXPECT_EQ(b.tokens[static_cast<size_t>(i)], 0);
    EXPECT_EQ(b.pos[static_cast<size_t>(i)], 0);
    EXPECT_EQ(b.kv_slot[static_cast<size_t>(i)], 9 * 4);
    EXPECT_EQ(b.block_table[static_cast<size_t>(i) * 3], 9);
  }
  // Rows after the wanted ones stay valid indices, so a graph computing all rows reads no junk.
  for (int i = 1; i < 4; ++i) EXPECT_LT(b.logit_rows[static_cast<size_t>(i)], 4);
}

TEST(DeviceBatch, RestagingClearsOldBlockTables) {
  DeviceKvGeometry geo{.block_size = 2, .max_blocks_per_seq = 2, .pad_block = 0};
  DeviceBatch b(2, geo);
  KvSequence s{.blocks = {3, 4}, .n_past = 0};
  std::vector<BatchToken> one = {{.token = 1, .pos = 3, .seq = &s, .want_logits = true}};
  stage_batch(one, 1, geo, b);
  KvSequence t{.blocks = {5}, .n_past = 0};
  std::vector<BatchToken> other = {{.token = 1, .pos = 0, .seq = &t, .want_logits = true}};
  stage_batch(other, 1, geo, b);
  EXPECT_EQ(b.block_table[0], 5);
  EXPECT_EQ(b.block_table[1], 0);
}

// A prompt chunk that starts inside a partly written block (positions 6..8 with blocks of 4, beside
// a decode): each row's slot is its own position's, its table the sequence's whole table, so the
// attention kernel reads the earlier chunk's rows of the same block.
TEST(DeviceBatch, AChunkStartingMidBlockWritesFromItsOwnSlot) {
  DeviceKvGeometry geo{.block_size = 4, .max_blocks_per_seq = 3, .pad_block = 0};
  DeviceBatch b(4, geo);
  KvSequence prompt{.blocks = {6, 3, 8}, .n_past = 0};
  KvSequence stream{.blocks = {5}, .n_past = 0};
  std::vector<BatchToken> batch = {{.token = 9, .pos = 2, .seq = &stream, .want_logits = true, .generated = true},
                                   {.token = 1, .pos = 6, .seq = &prompt},
                                   {.token = 2, .pos = 7, .seq = &prompt},
                                   {.token = 3, .pos = 8, .seq = &prompt, .want_logits = true}};
  stage_batch(batch, 4, geo, b);
  EXPECT_EQ(std::vector<int32_t>(b.kv_slot.begin(), b.kv_slot.end()), (std::vector<int32_t>{22, 14, 15, 32}));
  EXPECT_EQ(std::vector<int32_t>(b.pos.begin(), b.pos.end()), (std::vector<int32_t>{2, 6, 7, 8}));
  for (int row = 1; row < 4; ++row)
    EXPECT_EQ(std::vector<int32_t>(b.block_table.begin() + row * 3, b.block_table.begin() + row * 3 + 3),
              (std::vector<int32_t>{6, 3, 8}));
  EXPECT_EQ(b.n_logits, 2);
  EXPECT_EQ(b.logit_rows[0], 0);
  EXPECT_EQ(b.logit_rows[1], 3);
}

TEST(DeviceBatch, RejectsWhatDoesNotFit) {
  DeviceKvGeometry geo{.block_size = 2, .max_blocks_per_seq = 1, .pad_block = 0};
  DeviceBatch b(2, geo);
  KvSequence s{.blocks = {1}, .n_past = 0};
  std::vector<BatchToken> unreserved = {{.token = 1, .pos = 2, .seq = &s, .want_logits = true}};
  EXPECT_THROW(stage_batch(unreserved, 1, geo, b), std::invalid_argument);
  KvSequence wide{.blocks = {1, 2}, .n_past = 0};
  std::vector<BatchToken> too_wide = {{.token = 1, .pos = 0, .seq = &wide, .want_logits = true}};
  EXPECT_THROW(stage_batch(too_wide, 1, geo, b), std::invalid_argument);
  std::vector<BatchToken> ok = {{.token = 1, .pos = 0, .seq = &s, .want_logits = true}};
  EXPECT_THROW(stage_batch(ok, 3, geo, b), std::invalid_argument);
  EXPECT_THROW(DeviceBatch(0, geo), std::invalid_argument);
  EXPECT_THROW(DeviceBatch(1, {.block_size = 0, .max_blocks_per_seq = 1, .pad_block = 0}), std::invalid_argument);
}

}  // namespace
}  // namespace vigil
