// The tensor-parallel plan: a batch survives the trip to a follower exactly, and a plan that does
// not describe a batch is refused with a message instead of pointing tokens at nothing.
#include "backend/batch_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace vigil {
namespace {

TEST(BatchPlan, RoundTripsTokensFlagsAndBlockTables) {
  KvSequence a, b;
  a.blocks = {7, 3};
  b.blocks = {5};
  std::vector<BatchToken> batch = {{.token = 11, .pos = 0, .seq = &a},
                                   {.token = 12, .pos = 1, .seq = &a, .want_logits = true},
                                   {.token = 13, .pos = 16, .seq = &b, .want_logits = true, .generated = true}};

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

// The plan is refused with the message that names what is wrong with it.
void expect_refused(std::span<const int32_t> plan, const std::string& what) {
  std::vector<BatchToken> out;
  std::vector<KvSequence> seqs;
  EXPECT_THAT([&] { decode_batch_plan(plan, out, seqs); },
              testing::ThrowsMessage<std::runtime_error>(testing::StrEq("tensor parallel: the leader's plan " + what)));
}

TEST(BatchPlan, RefusesPlansThatDoNotDescribeABatch) {
  KvSequence a;
  a.blocks = {1, 2};
  const std::vector<BatchToken> batch = {{.token = 5, .pos = 0, .seq = &a, .want_logits = true}};
  BatchPlanEncoder encoder;
  const std::span<int32_t> good = encoder.encode(batch);
  ASSERT_EQ(good.size(), 3u + 4u + 1u + 2u);  // counts, one token, one block count, two block ids

  expect_refused(std::vector<int32_t>{1, 1}, "has no counts");
  expect_refused(std::vector<int32_t>{-1, 0, 0}, "has a negative count");

  const std::vector<int32_t> truncated(good.begin(), good.end() - 1);
  expect_refused(truncated, "has 9 ints, not the 10 its counts say");

  std::vector<int32_t> bad_seq(good.begin(), good.end());
  bad_seq[3 + 2] = 4;  // the token's sequence index: only sequence 0 exists
  expect_refused(bad_seq, "names sequence 4");

  std::vector<int32_t> bad_length(good.begin(), good.end());
  bad_length[3 + 4] = 3;  // sequence 0 claims three of the two block ids carried
  expect_refused(bad_length, "gives sequence 0 more block ids than it carries");
}

}  // namespace
}  // namespace vigil
