// RetiredSums: a group's sum keeps what its exited members counted while it has members, and for
// one linger period after the last one; then the group is dropped.
#include "collectors/group_sums.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

struct Count {
  int n = 0;
  Count& operator+=(const Count& o) {
    n += o.n;
    return *this;
  }
};

const LabelList kWeb{{"container", "web"}, {"comm", "curl"}};
const LabelList kDb{{"container", "db"}, {"comm", "psql"}};

TEST(RetiredSums, KeepsWhatMembersCountedWhileTheGroupHasMembers) {
  RetiredSums<Count> sums(10s);
  auto t0 = RetiredSums<Count>::Clock::now();
  sums.retire(kWeb, {3}, t0);
  sums.retire(kWeb, {4}, t0 + 1s);
  sums.retire(kDb, {5}, t0 + 1s);
  // web still has a member an hour later; db's last one left at t0 + 1 s.
  for (auto t = t0 + 2s; t < t0 + 1h; t += 5s) sums.expire({kWeb}, t);
  auto got = sums.sums();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got.at(kWeb).n, 7);
}

TEST(RetiredSums, DropsAGroupOneLingerAfterItsLastMemberLeft) {
  RetiredSums<Count> sums(10s);
  auto t0 = RetiredSums<Count>::Clock::now();
  sums.retire(kWeb, {2}, t0);
  sums.expire({kWeb}, t0 + 5s);  // a member was still alive at t0 + 5 s
  sums.expire({}, t0 + 14s);
  ASSERT_EQ(sums.sums().size(), 1u) << "dropped before lingering 10 s after its last member";
  EXPECT_EQ(sums.sums().at(kWeb).n, 2);
  sums.expire({}, t0 + 16s);
  EXPECT_TRUE(sums.sums().empty());
}

TEST(GroupOf, DropsOnlyThePid) {
  LabelList process{{"pid", "42"}, {"comm", "curl"}, {"container", "web"}};
  EXPECT_EQ(group_of(process), (LabelList{{"comm", "curl"}, {"container", "web"}}));
}

}  // namespace
}  // namespace vigil::agent
