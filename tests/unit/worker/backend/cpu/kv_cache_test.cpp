// Paged KV cache: block tables grow on demand, blocks are never shared, release returns them all.
#include "backend/cpu/kv_cache.h"
#include "backend/kv_blocks.h"

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

TEST(KvBlockAllocator, PrefixCacheSharesFullBlocksOnly) {
  KvBlockAllocator alloc(8);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 full blocks of 4 + 2
  KvSequence a;
  EXPECT_EQ(alloc.match_prefix(a, prompt, 4), 0);  // nothing cached yet
  ASSERT_TRUE(alloc.reserve(a, 10, 4));
  alloc.publish(a, prompt, 10, 4);

  KvSequence b;
  EXPECT_EQ(alloc.match_prefix(b, prompt, 4), 8);  // both full blocks, not the partial third
  EXPECT_EQ(b.blocks, std::vector<int32_t>(a.blocks.begin(), a.blocks.begin() + 2));
  KvSequence c;
  std::vector<int32_t> other = prompt;
  other[5] = 99;  // differs in the second block
  EXPECT_EQ(alloc.match_prefix(c, other, 4), 4);
  EXPECT_EQ(alloc.prefix_hits(), 12u);
  EXPECT_EQ(alloc.prefix_queries(), 30u);

  // Shared blocks stay while anyone holds them; released cached blocks remain reusable.
  alloc.release(a);
  alloc.release(c);
  EXPECT_EQ(alloc.free_blocks(), 6);  // b still holds 2
  alloc.release(b);
  EXPECT_EQ(alloc.free_blocks(), 8);
  KvSequence d;
  EXPECT_EQ(alloc.match_prefix(d, prompt, 4), 8);
  alloc.release(d);
}

TEST(KvBlockAllocator, CachedBlocksAreEvictedOldestFirstWhenNeeded) {
  KvBlockAllocator alloc(3);
  const std::vector<int32_t> p1 = {1, 1, 1, 1, 9}, p2 = {2, 2, 2, 2, 9};
  KvSequence a, b;
  ASSERT_TRUE(alloc.reserve(a, 5, 4));  // blocks 0, 1
  alloc.publish(a, p1, 5, 4);           // block 0 cached under p1
  alloc.release(a);
  ASSERT_TRUE(alloc.reserve(b, 5, 4));  // takes the never-cached ones first: 1, 2
  alloc.publish(b, p2, 5, 4);
  alloc.release(b);
  KvSequence big;
  ASSERT_TRUE(alloc.reserve(big, 12, 4));  // needs all 3: evicts the p1 block, then the p2 one
  alloc.release(big);
  KvSequence again;
  EXPECT_EQ(alloc.match_prefix(again, p1, 4), 0);
}

TEST(KvCache, RejectsEmptyGeometry) {
  EXPECT_THROW(KvCache(tiny(), 0, 16), std::invalid_argument);
}

}  // namespace
}  // namespace vigil
