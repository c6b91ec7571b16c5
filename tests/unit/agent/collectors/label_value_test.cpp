// Label values: valid UTF-8 passes unchanged, every invalid byte becomes U+FFFD.
#include "collectors/label_value.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

TEST(LabelValue, ValidTextUnchanged) {
  for (const std::string s : {"", "python3", "tokio-rt-worker", "caf\xC3\xA9", "\xE2\x82\xAC 5",
                              "\xF0\x9F\x94\xA5", "\xED\x9F\xBF", "\xF4\x8F\xBF\xBF", "tab\there"})
    EXPECT_EQ(valid_utf8(s), s) << s;
}

TEST(LabelValue, InvalidBytesReplaced) {
  EXPECT_EQ(valid_utf8("\xFF"), kFFFD);                          // prctl(PR_SET_NAME, "\xff")
  EXPECT_EQ(valid_utf8("a\xFE" "b"), "a" + kFFFD + "b");
  EXPECT_EQ(valid_utf8("\xC0\x80"), kFFFD + kFFFD);              // overlong NUL
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // a UTF-16 surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);  // above U+10FFFF
  EXPECT_EQ(valid_utf8("x\xE2\x82"), "x" + kFFFD + kFFFD);       // cut short: comm is 15 bytes
  EXPECT_EQ(valid_utf8("\x80" "abc"), kFFFD + "abc");            // a lone continuation byte
}

}  // namespace
}  // namespace vigil::agent
