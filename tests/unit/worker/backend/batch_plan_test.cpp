// The tensor-parallel plan: a batch survives the trip to a follower exactly, and a plan that does
// not describe a batch is refused with a message instead of pointing tokens at nothing.
#include "backend/batch_plan.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace vigil {
namespace {

TEST(BatchPlan, RoundTripsTokensFlagsAndBlockTables) {
  KvSequence a, b;
  a.blocks = {7, 3};
  b.blocks = {5};
  std::vector<BatchToken> batch = {{11, 0, &a, false}, {12, 1, &a, true}, {13, 16, &b, true}};
  batch[2].generated = true;

  BatchPlanEncoder encoder;
  const std::span<int32_t> plan = encoder.encode(batch);
  std::vector<BatchToken> out;
  std::vector<KvSequence> seqs;
  decode_batch_plan(plan, out, seqs);

  ASSERT_EQ(out.size(), batch.size());
  ASSERT_EQ(seqs.size(), 2u);  // numbered by first appearance
  EXPECT_EQ(seqs[0].blocks, a.blocks);
  EXPECT_EQ(seqs[1].blocks, b.blocks);
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(out[i].token, batch[i].token);
    EXPECT_EQ(out[i].pos, batch[i].pos);
    EXPECT_EQ(out[i].want_logits, batch[i].want_logits);
    EXPECT_EQ(out[i].generated, batch[i].generated);
    EXPECT_EQ(out[i].seq->blocks, batch[i].seq->blocks);
  }
  EXPECT_EQ(out[0].seq, out[1].seq);  // one sequence, one table
}

TEST(BatchPlan, RefusesPlansThatDoNotDescribeABatch) {
  KvSequence a;
  a.blocks = {1, 2};
  const std::vector<BatchToken> batch = {{5, 0, &a, true}};
  BatchPlanEncoder encoder;
  const std::span<int32_t> good = encoder.encode(batch);
  std::vector<BatchToken> out;
  std::vector<KvSequence> seqs;

  std::vector<int32_t> truncated(good.begin(), good.end() - 1);
  EXPECT_THROW(decode_batch_plan(truncated, out, seqs), std::runtime_error);

  std::vector<int32_t> bad_seq(good.begin(), good.end());
  bad_seq[3 + 2] = 4;  // the token's sequence index: only sequence 0 exists
  EXPECT_THROW(decode_batch_plan(bad_seq, out, seqs), std::runtime_error);

  std::vector<int32_t> bad_length(good.begin(), good.end());
  bad_length[3 + 4] = 3;  // sequence 0 claims three of the two block ids carried
  EXPECT_THROW(decode_batch_plan(bad_length, out, seqs), std::runtime_error);

  EXPECT_THROW(decode_batch_plan(std::vector<int32_t>{-1, 0, 0}, out, seqs), std::runtime_error);
}

}  // namespace
}  // namespace vigil
