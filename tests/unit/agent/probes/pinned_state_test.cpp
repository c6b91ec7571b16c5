// process_start_ns read against stat files written here, and remove_pins refusing a tree that is
// not bpffs (the uninstall must never delete ordinary files).
#include "probes/pinned_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

namespace vigil::agent {
namespace {

namespace fs = std::filesystem;

class PinnedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("pinned_state_test." + std::to_string(getpid()));
    fs::create_directories(root_ / "42");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write_stat(const std::string& text) { std::ofstream(root_ / "42" / "stat") << text; }
  fs::path root_;
};

TEST_F(PinnedStateTest, StartTimeIsField22InTicks) {
  // A comm with spaces and ')' (the workload names itself): fields count from the last ')'.
  write_stat("42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 12345 1000 100 "
             "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
  uint64_t per_tick = 1000000000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  EXPECT_EQ(process_start_ns(root_.string(), 42), 12345 * per_tick);
}

TEST_F(PinnedStateTest, UnreadableOrShortStatIsZero) {
  EXPECT_EQ(process_start_ns(root_.string(), 7), 0u);
  write_stat("42 (x) S 1 42");
  EXPECT_EQ(process_start_ns(root_.string(), 42), 0u);
}

TEST_F(PinnedStateTest, OwnStartIsBeforeNow) {
  uint64_t start = process_start_ns("/proc", static_cast<uint32_t>(getpid()));
  EXPECT_GT(start, 0u);
  EXPECT_LE(start, boot_time_ns());
}

TEST_F(PinnedStateTest, CleanupRefusesWhatIsNotBpffs) {
  EXPECT_EQ(remove_pins(root_.string()), -ENOTDIR);
  EXPECT_TRUE(fs::exists(root_ / "42"));
  EXPECT_EQ(remove_pins((root_ / "absent").string()), 0);
}

}  // namespace
}  // namespace vigil::agent
