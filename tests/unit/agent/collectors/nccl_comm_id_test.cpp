// The communicator id is FNV-1a 64: the published test vectors of the FNV reference
// (http://www.isthe.com/chongo/tech/comp/fnv/, fnv1a_64 "", "a", "foobar"), and all 128 bytes of
// an ncclUniqueId count.
#include "collectors/nccl_comm_id.h"

#include <gtest/gtest.h>

#include <cstring>

namespace vigil::agent {
namespace {

const unsigned char* bytes(const char* s) { return reinterpret_cast<const unsigned char*>(s); }

TEST(NcclCommId, FnvReferenceVectors) {
  EXPECT_EQ(nccl_comm_id(bytes(""), 0), "cbf29ce484222325");
  EXPECT_EQ(nccl_comm_id(bytes("a"), 1), "af63dc4c8601ec8c");
  EXPECT_EQ(nccl_comm_id(bytes("foobar"), 6), "85944171f73967e8");
}

TEST(NcclCommId, EveryByteOfTheIdCounts) {
  unsigned char a[128], b[128];
  std::memset(a, 0x5a, sizeof a);
  std::memcpy(b, a, sizeof b);
  b[127] ^= 1;
  EXPECT_NE(nccl_comm_id(a, sizeof a), nccl_comm_id(b, sizeof b));
  EXPECT_EQ(nccl_comm_id(a, sizeof a), nccl_comm_id(a, sizeof a));
}

}  // namespace
}  // namespace vigil::agent
