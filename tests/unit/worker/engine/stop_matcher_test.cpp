// StopMatcher: stop strings split across pieces, held-back prefixes released, nothing after a stop.
#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace vigil {
namespace {

TEST(StopMatcher, PassesTextThroughWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(m.push("hello "), "hello ");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopSplitAcrossPieces) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(m.push("abc<"), "abc");
  EXPECT_EQ(m.push("/"), "");
  EXPECT_EQ(m.push("s>tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("xST"), "x");
  EXPECT_EQ(m.push("Oy"), "STOy");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("ST"), "");
  EXPECT_EQ(m.flush(), "ST");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"bb", "a"});
  EXPECT_EQ(m.push("xxbbya"), "xx");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace vigil
