// bearer_matches: the header forms RFC 6750 clients send, and near misses that must not pass.
#include "server/api_access.h"

#include <gtest/gtest.h>

namespace vigil {
namespace {

TEST(BearerMatches, TheKeyAfterTheBearerScheme) {
  EXPECT_TRUE(bearer_matches("Bearer s3cret-key", "s3cret-key"));
  EXPECT_TRUE(bearer_matches("bearer s3cret-key", "s3cret-key"));  // the scheme is case-insensitive
  EXPECT_TRUE(bearer_matches("BEARER s3cret-key", "s3cret-key"));
}

TEST(BearerMatches, NearMissesAreRefused) {
  EXPECT_FALSE(bearer_matches("", "s3cret-key"));
  EXPECT_FALSE(bearer_matches("Bearer ", "s3cret-key"));
  EXPECT_FALSE(bearer_matches("Bearer s3cret-ke", "s3cret-key"));    // a prefix
  EXPECT_FALSE(bearer_matches("Bearer s3cret-keyX", "s3cret-key"));  // longer
  EXPECT_FALSE(bearer_matches("Bearer S3cret-key", "s3cret-key"));   // the key itself is case-sensitive
  EXPECT_FALSE(bearer_matches("Basic s3cret-key", "s3cret-key"));
  EXPECT_FALSE(bearer_matches("s3cret-key", "s3cret-key"));          // no scheme
  EXPECT_FALSE(bearer_matches("Bearer  s3cret-key", "s3cret-key"));  // two spaces: a different token
  EXPECT_FALSE(bearer_matches(std::string_view("Bearer s3cret-key\0", 18), "s3cret-key"));
}

TEST(BearerMatches, AnEmptyKeyMatchesNothing) {
  EXPECT_FALSE(bearer_matches("Bearer ", ""));
  EXPECT_FALSE(bearer_matches("", ""));
}

}  // namespace
}  // namespace vigil
