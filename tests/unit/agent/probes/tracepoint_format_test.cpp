// Format-file parsing against the nvidia:nvidia_dev_xid fixture and a live tracepoint.
#include "probes/tracepoint_format.h"

#include <gtest/gtest.h>

#include "discovery/process_table.h"

namespace vigil::agent {
namespace {

TEST(TracepointFormat, NvidiaDevXidFixture) {
  auto fields = parse_tracepoint_format(
      read_text_file(std::string(VIGIL_SOURCE_DIR) + "/tests/unit/agent/fixtures/nvidia_dev_xid.format"));
  ASSERT_EQ(fields.count("dev"), 1u);
  EXPECT_TRUE(fields["dev"].data_loc());
  EXPECT_EQ(fields["dev"].offset, 8u);
  EXPECT_EQ(fields["dev"].size, 4u);
  EXPECT_FALSE(fields["error_code"].data_loc());
  EXPECT_EQ(fields["error_code"].type, "u32");
  EXPECT_EQ(fields["error_code"].offset, 12u);
  EXPECT_TRUE(fields["msg"].data_loc());
  EXPECT_EQ(fields["msg"].offset, 16u);
  EXPECT_EQ(fields["common_pid"].offset, 4u);
}

TEST(TracepointFormat, ArraysAndGarbage) {
  auto fields = parse_tracepoint_format("\tfield:__u8 saddr[4];\toffset:34;\tsize:4;\tsigned:0;\nnonsense\nfield:x;");
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields["saddr"].offset, 34u);
  EXPECT_TRUE(parse_tracepoint_format("").empty());
}

TEST(TracepointFormat, MissingTracepoint) {
  EXPECT_FALSE(read_tracepoint_format("/sys/kernel/tracing", "vigil_none", "nothing").has_value());
}

}  // namespace
}  // namespace vigil::agent
