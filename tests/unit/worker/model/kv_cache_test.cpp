// Paged KV cache: block tables grow on demand, blocks are never shared, release returns them all.
#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <set>

namespace vigil {
namespace {

LlamaHparams tiny() {
  LlamaHparams hp;
  hp.n_layer = 2;
  hp.n_head = 4;
  hp.n_head_kv = 2;
  hp.head_dim = 16;
  hp.n_embd = 64;
  return hp;
}

TEST(KvCache, RowsDoNotOverlap) {
  KvCache cache(tiny(), 3, 4);
  EXPECT_EQ(cache.kv_dim(), 32);
  EXPECT_EQ(cache.bytes(), 2u * 3 * 2 * 4 * 32 * 2);
  std::set<const uint16_t*> rows;
  for (int l = 0; l < 2; ++l)
    for (int b = 0; b < 3; ++b)
      for (int s = 0; s < 4; ++s) {
        rows.insert(cache.k(l, b, s));
        rows.insert(cache.v(l, b, s));
      }
  EXPECT_EQ(rows.size(), 2u * 3 * 4 * 2);
  // Consecutive slots of a block are consecutive rows.
  EXPECT_EQ(cache.k(1, 2, 1) - cache.k(1, 2, 0), 32);
}

TEST(KvBlockAllocator, ReserveGrowsReleaseReturns) {
  KvBlockAllocator alloc(5);
  KvSequence a, b;
  EXPECT_TRUE(alloc.reserve(a, 5, 4));  // 2 blocks
  EXPECT_EQ(a.blocks.size(), 2u);
  EXPECT_TRUE(alloc.reserve(a, 8, 4));  // still 2
  EXPECT_EQ(a.blocks.size(), 2u);
  EXPECT_TRUE(alloc.reserve(b, 12, 4));  // 3 blocks
  EXPECT_EQ(alloc.free_blocks(), 0);
  EXPECT_FALSE(alloc.reserve(a, 9, 4));  // needs a third: none left, a unchanged
  EXPECT_EQ(a.blocks.size(), 2u);
  std::set<int32_t> all(a.blocks.begin(), a.blocks.end());
  all.insert(b.blocks.begin(), b.blocks.end());
  EXPECT_EQ(all.size(), 5u);
  alloc.release(b);
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(alloc.free_blocks(), 3);
  EXPECT_TRUE(alloc.reserve(a, 9, 4));
}

TEST(KvCache, RejectsEmptyGeometry) {
  EXPECT_THROW(KvCache(tiny(), 0, 16), std::invalid_argument);
}

}  // namespace
}  // namespace vigil
